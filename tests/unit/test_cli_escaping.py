"""The CLI prints what topics hold (payloads, reasons, ids, queue names): as text, never as markup,
terminal escapes or bidi reordering; characters that would act are shown escaped (``\\x1b``)."""

import io
import json

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

from kmq.cli import main
from kmq.cli.connect import printable, shown
from tests import http_stub

HOSTILE = ["[/]", "[link=https://evil.example]click[/link]", "\x1b[2J\x1b]0;pwned\x07", "[bold red]x",
           "tab\tnew\nline\r", "\x9b31m", "plain", "invoice\u202efdp.exe", "a\u2066b\u2069\u200f\u061c",
           "line\u2028para\u2029"]
# Each character that must not reach a terminal as it is, and how it is printed.
ESCAPES = {"\x1b": "\\x1b", "\x07": "\\x07", "\x00": "\\x00", "\x7f": "\\x7f", "\x9b": "\\x9b", "\n": "\\n",
           "\t": "\\t", "\r": "\\r", "\u202e": "\\u202e", "\u202a": "\\u202a", "\u2066": "\\u2066",
           "\u2069": "\\u2069", "\u200e": "\\u200e", "\u200f": "\\u200f", "\u061c": "\\u061c",
           "\u2028": "\\u2028", "\u2029": "\\u2029"}


def acts(ch: str) -> bool:
    return ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f or ch in ESCAPES


def render(cells: list[str]) -> str:
    out = io.StringIO()
    table = Table()
    table.add_column("v")
    for c in cells:
        table.add_row(c)
    Console(file=out, width=200, highlight=False, force_terminal=False).print(table)
    return out.getvalue()


def test_unescaped_payloads_break_or_style_the_output():
    # What happened before: "[/]" aborts rich's markup parser.
    with pytest.raises(Exception):
        render(["[/]"])


@pytest.mark.parametrize("char, escaped", ESCAPES.items())
def test_a_character_that_acts_on_the_terminal_is_printed_as_its_escape(char, escaped):
    # Before: C0/C1 became U+FFFD (what was sent unknowable), bidi controls went out as they are.
    assert printable(f"a{char}b") == f"a{escaped}b"


@pytest.mark.parametrize("text", HOSTILE)
def test_a_payload_is_printed_as_its_text_without_markup_or_characters_that_act(text):
    printed = render([shown(text)])
    assert not any(acts(ch) for ch in printed if ch != "\n")  # the table's own line ends only
    assert "".join(ESCAPES.get(ch, ch) for ch in text) in printed  # brackets and all, as sent


def test_other_unicode_is_printed_as_it_is():
    assert printable("zoë 東京 🙂 \\x1b") == "zoë 東京 🙂 \\x1b"


def test_an_error_keeps_its_own_lines_and_escapes_the_rest(capsys):
    from kmq.cli.connect import fail
    with pytest.raises(SystemExit):
        fail("queue 'a\u202eb' failed\nsecond line \x1b[2J")
    assert capsys.readouterr().err == "error: queue 'a\\u202eb' failed\nsecond line \\x1b[2J\n"


class _Letters:
    """kmq.client.Client as dlq list uses it, with a dead letter any producer could have written."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def dead_letters(self, queue, reason=None):
        from kmq.ops.dead_letter_log import DeadLetter
        return [DeadLetter(queue=queue, offset=0, id="id\u202e1", value=b"v\x1b]0;pwned\x07", headers={},
                           reason="rejected", detail="bad \u202eevil\x1b[2J", deliveries=1,
                           first_delivery_ms=0, last_delivery_ms=0, dead_lettered_ms=0)]


def test_dlq_list_prints_a_hostile_reason_escaped_and_its_json_stays_valid(monkeypatch):
    import kmq.cli.connect
    import kmq.client
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    monkeypatch.setattr(kmq.client, "Client", _Letters)
    out = CliRunner().invoke(main, ["dlq", "list", "orders", "--bootstrap-servers", "127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    assert "rejected: bad \\u202eevil\\x1b[2J" in out.output and "id\\u202e1" in out.output
    assert "v\\x1b]0;pwned\\x07" in out.output
    assert not any(acts(ch) for ch in out.output if ch != "\n")
    out = CliRunner().invoke(main, ["dlq", "list", "orders", "--json", "--bootstrap-servers", "127.0.0.1:1"])
    assert out.exit_code == 0 and not any(acts(ch) for ch in out.output if ch != "\n")
    assert json.loads(out.output)["detail"] == "bad \u202eevil\x1b[2J"  # valid JSON, the text as sent


def test_stats_prints_queue_names_read_back_escaped(monkeypatch):
    row = {"queue": "orders\u202e\x1b[2J", "depth": 1, "depth_exact": True}
    with http_stub.serving(http_stub.always(200, http_stub.queue_list([row]))) as (url, _):
        out = CliRunner().invoke(main, ["stats", "--url", url, "--timeout-s", "10"])
        as_json = CliRunner().invoke(main, ["stats", "--url", url, "--timeout-s", "10", "--json"])
    assert out.exit_code == 0, out.output
    assert "orders\\u202e\\x1b[2J" in out.output
    assert not any(acts(ch) for ch in out.output if ch != "\n")
    assert json.loads(as_json.output)["queues"][0]["queue"] == "orders\u202e\x1b[2J"
    # A count that is text is no tracker's: refused, its text not printed (it was, escaped).
    with http_stub.serving(http_stub.always(200, http_stub.queue_list([row], workers="1\x1b[2J"))) as (url, _):
        out = CliRunner().invoke(main, ["stats", "--url", url, "--timeout-s", "10"])
    assert out.exit_code == 1 and "workers of type str" in out.output and "\x1b" not in out.output


def test_spark_rows_are_printed_escaped():
    from kmq.spark.cli import shown_rows

    class Rows:  # a DataFrame's show(), as pyspark prints it
        def show(self, n, truncate=True):
            print("+-----+\n|queue|\n+-----+\n|a\u202e\x1b[2J|\n+-----+")

    assert shown_rows(Rows(), 20) == "+-----+\n|queue|\n+-----+\n|a\\u202e\\x1b[2J|\n+-----+\n"

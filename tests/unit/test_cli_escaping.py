"""The CLI prints what topics hold (payloads, reasons, ids): as text, never as markup or escapes."""

import io

import pytest
from rich.console import Console
from rich.table import Table

from kmq.cli.connect import shown

HOSTILE = ["[/]", "[link=https://evil.example]click[/link]", "\x1b[2J\x1b]0;pwned\x07", "[bold red]x",
           "tab\tnew\nline\r", "\x9b31m", "plain"]


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


@pytest.mark.parametrize("text", HOSTILE)
def test_a_payload_is_printed_as_its_text_without_markup_or_control_characters(text):
    printed = render([shown(text)])
    assert not any(ord(ch) < 0x20 and ch != "\n" or 0x7f <= ord(ch) <= 0x9f for ch in printed)
    visible = "".join(ch if not (ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f) else "\ufffd" for ch in text)
    assert visible in printed  # brackets and all, as sent

"""docs/cli.md, docs/web.md and docs/configuration.md read as a user reads them (second audit),
without a broker: each test names the claim it checks."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from multidict import MultiDict, MultiDictProxy

from kmq.cli import main
from kmq.errors import ConfigError
from kmq.settings import Settings
from tests import http_stub


def run(*args: str, **kwargs):
    out = CliRunner().invoke(main, list(args), **kwargs)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exc_info
    return out


@contextmanager
def answering(body: bytes, content_type: str = "text/html", status: int = 200):
    """A web server on 127.0.0.1 that answers every GET with ``body``: not a tracker."""
    with http_stub.serving(http_stub.always(status, body, content_type)) as (url, _):
        yield url


# -- kmq stats -----------------------------------------------------------------------

@pytest.mark.parametrize("body", [b"<html>a router's login page</html>", b"[1, 2]", b'{"status": "ok"}'])
@pytest.mark.parametrize("queue", [[], ["orders"]])
def test_stats_against_an_address_that_is_not_a_tracker_is_one_error_line_naming_url(body, queue):
    # docs/cli.md: a failure is one `error: ...` line, exit status 1. An answer that was not a
    # tracker's JSON was a traceback (JSONDecodeError, or KeyError 'queues').
    with answering(body) as url:
        out = run("stats", *queue, "--url", url, "--timeout-s", "5")
    assert out.exit_code == 1, out.output
    assert out.output.startswith("error: ") and out.output.count("\n") == 1, out.output
    assert "--url" in out.output and "not a tracker" in out.output


LIST_WITH_WRONG_TYPES = [
    b'{"queues": [1], "total": 1, "workers": 1, "partial": false}',  # AttributeError: 'int' ... 'get'
    b'{"queues": "abc", "total": 1, "workers": 1, "partial": false}',
    b'{"queues": [], "total": "many", "workers": 1, "partial": false}',
    b'{"queues": [], "total": 0, "workers": null, "partial": "no"}',
]
DETAIL_WITH_WRONG_TYPES = [
    b'{"queue": "orders", "in_flight_range_count": 0, "dead_letters_detail": null, "since_start": {}}',  # TypeError
    b'{"queue": "orders", "in_flight_range_count": 0, "dead_letters_detail": {}, "since_start": {}}',
    b'{"queue": "orders", "in_flight_range_count": [], "dead_letters_detail": {"count": 1}, "since_start": {}}',
]


@pytest.mark.parametrize("body, queue", [(b, []) for b in LIST_WITH_WRONG_TYPES]
                         + [(b, ["orders"]) for b in DETAIL_WITH_WRONG_TYPES])
def test_stats_against_the_trackers_field_names_with_other_types_is_one_error_line(body, queue):
    # An audit: a server answering the tracker's names with other types gave a traceback.
    with answering(body, "application/json") as url:
        out = run("stats", *queue, "--url", url, "--timeout-s", "5")
    assert out.exit_code == 1 and out.output.startswith("error: "), out.output
    assert out.output.count("\n") == 1 and " of type " in out.output and "--url" in out.output, out.output


@pytest.mark.parametrize("body", [b"[]", b'"gone"', b"<html>404</html>"])
def test_stats_against_a_server_answering_an_error_that_is_not_a_trackers_is_one_error_line(body):
    # tracker_get read the error's JSON with .get(): a list or a string was an AttributeError.
    with answering(body, status=404) as url:
        out = run("stats", "--url", url, "--timeout-s", "5")
    assert out.exit_code == 1 and out.output.startswith("error: ") and "HTTP 404" in out.output, out.output
    assert out.output.count("\n") == 1, out.output


def test_stats_sort_that_is_no_field_of_the_list_is_a_usage_error_before_the_tracker_is_asked():
    # docs/cli.md: a value that is not one of the choices is a usage error naming the option
    # (exit 2), before anything else. `--sort bogus` asked the tracker and failed with its 400.
    out = run("stats", "--url", "http://127.0.0.1:1", "--sort", "bogus")
    assert out.exit_code == 2 and "--sort" in out.output and "depth" in out.output, out.output
    assert "no tracker web view answered" not in out.output


def test_stats_sort_choices_are_the_web_lists_sort_fields():
    from kmq.cli.ops import STATS_SORT_FIELDS
    from web.queue_stats import SORT_FIELDS
    assert set(STATS_SORT_FIELDS) == set(SORT_FIELDS)


# -- kmq send ------------------------------------------------------------------------

class RecordingClient:
    """kmq.Client at the CLI's seam: records sends, refuses one too large as the SDK does."""

    sent: list[bytes] = []

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def send(self, queue, value, headers=None, delay_s=None):
        if len(value) > self.settings.max_message_bytes:
            raise ConfigError(f"value of queue {queue!r} is {len(value)} bytes (KMQ_MAX_MESSAGE_BYTES)")
        RecordingClient.sent.append(value)
        return f"id-{len(RecordingClient.sent)}"

    def flush(self):
        return None


def test_send_with_one_value_too_large_sends_none_of_them(monkeypatch):
    # docs/cli.md: a limit that comes from a setting is one error line, exit status 1, "with
    # nothing sent". A large value after small ones left the small ones sent (a retry of the
    # command then sent them twice).
    import kmq.cli.connect
    import kmq.client
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    monkeypatch.setattr(kmq.client, "Client", RecordingClient)
    monkeypatch.setenv("KMQ_MAX_MESSAGE_BYTES", "2000")
    RecordingClient.sent = []
    out = run("send", "orders", "--bootstrap-servers", "127.0.0.1:1",
              input=b"first\n" + b"x" * 3000 + b"\nthird\n")
    assert RecordingClient.sent == []
    assert out.exit_code == 1 and out.output.startswith("error: "), out.output
    assert "KMQ_MAX_MESSAGE_BYTES" in out.output and "line 2" in out.output
    RecordingClient.sent = []
    ok = run("send", "orders", "--bootstrap-servers", "127.0.0.1:1", input=b"first\nsecond\n")
    assert ok.exit_code == 0 and RecordingClient.sent == [b"first", b"second"], ok.output


def test_send_header_given_twice_is_a_usage_error_not_one_silently_dropped():
    out = run("send", "orders", "v", "-H", "source=a", "-H", "source=b",
              "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "0.5")
    assert out.exit_code == 2 and "--header" in out.output and "source" in out.output, out.output


# -- /kmq/api/queues -----------------------------------------------------------------

def test_a_list_parameter_given_twice_is_a_400_naming_it():
    # docs/web.md: a bad value is a 400 naming the parameter. `?limit=1&limit=500` was
    # answered with the first and the second silently dropped.
    from web import paging
    for query, named in ([("limit", "1"), ("limit", "500")], "limit"), ([("sort", "depth"), ("sort", "queue")], "sort"):
        request = SimpleNamespace(query=MultiDictProxy(MultiDict(query)))
        with pytest.raises(ValueError, match=rf"{named}.*given 2 times"):
            paging._page_params(request)
    once = SimpleNamespace(query=MultiDictProxy(MultiDict([("limit", "5"), ("sort", "depth")])))
    assert paging._page_params(once)["limit"] == 5


# -- docs/configuration.md ------------------------------------------------------------

@pytest.mark.parametrize("variable, value, stated", [
    ("KMQ_DELIVERY_TIMEOUT_MS", "10000", "at least 30000"),
    ("KMQ_WEB_PORT", "70000", "1-65535"),
    ("KMQ_MIN_INSYNC_REPLICAS", "4", "at most the replication factor"),
])
def test_a_refused_setting_value_breaks_a_bound_the_reference_states(variable, value, stated):
    # configuration.md: a value is refused when "out of its range (... within any bounds it
    # states)"; these bounds were enforced and not stated.
    from kmq.config_reference import reference_markdown
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})
    row = next(line for line in reference_markdown().splitlines() if line.startswith(f"| `{variable}`"))
    assert stated in row, row


def test_the_admin_token_length_is_stated():
    from kmq.config_reference import reference_markdown
    with pytest.raises(ConfigError, match="at least 16 characters"):
        Settings.from_env({"KMQ_AUTH": "on", "KMQ_ADMIN_TOKEN": "short"})
    row = next(line for line in reference_markdown().splitlines() if line.startswith("| `KMQ_ADMIN_TOKEN`"))
    assert "at least 16 characters" in row, row

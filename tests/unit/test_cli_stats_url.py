"""`kmq stats --url` / KMQ_TRACKER_URL as users give it: without a scheme, with a trailing slash
or one of the addresses `kmq dev` prints (.../kmq/ui), or pointing at a server that is not a
tracker. Each works or is one error naming --url / KMQ_TRACKER_URL and the fix, never a traceback."""

from __future__ import annotations

import json
import socket
import threading

import click
import pytest
from click.testing import CliRunner

from kmq.cli import main
from kmq.cli.option_checks import tracker_url
from tests import http_stub

TRACKER_LIST = json.dumps({"queues": [{"queue": "orders", "depth": 7}], "total": 1, "workers": 1,
                           "partial": False}).encode()


def run(*args: str, env: dict | None = None):
    out = CliRunner().invoke(main, list(args), env=env)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exc_info
    assert "Traceback" not in out.output
    return out


def serving(status: int = 200, body: bytes = TRACKER_LIST, content_type: str = "application/json"):
    """A stand-in server on 127.0.0.1 answering every GET alike; yields (address, paths asked)."""
    return http_stub.serving(http_stub.always(status, body, content_type))


@pytest.mark.parametrize("given, base", [
    ("http://127.0.0.1:6066", "http://127.0.0.1:6066"),
    ("http://127.0.0.1:6066/", "http://127.0.0.1:6066"),
    ("http://127.0.0.1:6066/kmq/ui", "http://127.0.0.1:6066"),  # what kmq dev prints as the web view
    ("http://127.0.0.1:6066/kmq/api/queues/", "http://127.0.0.1:6066"),  # ... and as the API
    ("https://ops.example/tracker/", "https://ops.example/tracker"),  # a proxy's prefix is kept
    ("https://ops.example/tracker/metrics", "https://ops.example/tracker"),
])
def test_a_trackers_address_is_taken_as_its_base(given, base):
    assert tracker_url(None, None, given) == base  # type: ignore[arg-type]


@pytest.mark.parametrize("given, says", [
    ("127.0.0.1:6066", "has no scheme: give http://127.0.0.1:6066"),
    ("localhost", "has no scheme: give http://localhost"),
    ("http://user:secret@127.0.0.1:6066", "holds a user name: give the address without it, and the token "
                                          "with --token / KMQ_TOKEN"),
    ("http://127.0.0.1:6066/?sort=depth", "without '?...' or '#...', e.g. http://127.0.0.1:6066"),
    ("http://127.0.0.1:6066#top", "without '?...' or '#...'"),
    ("http://tracker host:6066", "holds a space or a control character"),
])
def test_an_address_that_cannot_be_a_trackers_names_the_option_and_the_fix(given, says):
    with pytest.raises(click.BadParameter, match="--url / KMQ_TRACKER_URL") as caught:
        tracker_url(None, None, given)  # type: ignore[arg-type]
    assert says in caught.value.message


@pytest.mark.parametrize("address", ["127.0.0.1:6066", "http://tracker host:6066", "http://u:p@127.0.0.1:1"])
def test_the_cli_refuses_them_before_asking_anything(address):
    # Before: no scheme was refused without saying what was missing; a space was a traceback
    # (http.client.InvalidURL); user:password went to DNS as the host, and into the error line.
    out = run("stats", "--url", address, "--timeout-s", "1")
    assert out.exit_code == 2 and "Error: Invalid value for '--url'" in out.output, out.output
    out = run("stats", "--timeout-s", "1", env={"KMQ_TRACKER_URL": address})
    assert out.exit_code == 2 and "KMQ_TRACKER_URL" in out.output, out.output


@pytest.mark.parametrize("suffix", ["/", "//", "/kmq/ui", "/kmq/api/queues", "/kmq/api/queues/"])
def test_stats_asks_the_api_under_the_base_of_the_address_given(suffix):
    # Before: .../kmq/ui asked .../kmq/ui/kmq/api/queues, a 404 printed as "HTTP 404" alone.
    with serving() as (url, asked):
        out = run("stats", "--url", url + suffix, "--timeout-s", "5")
    assert out.exit_code == 0, out.output
    assert asked and asked[0].startswith("/kmq/api/queues?") and "orders" in out.output


@pytest.mark.parametrize("status, body", [(404, b"404: Not Found"), (404, b"<html>not here</html>"),
                                          (500, b'{"detail": "x"}'), (302, b"")])
def test_a_server_that_is_not_a_tracker_is_one_error_line_naming_url_and_the_fix(status, body):
    with serving(status, body, "text/plain") as (url, _):
        out = run("stats", "--url", url + "/nonsense", "--timeout-s", "5")
    assert out.exit_code == 1 and out.output.count("\n") == 1, out.output
    assert out.output.startswith("error: ") and f"HTTP {status}, not a tracker's JSON: is --url / " \
        "KMQ_TRACKER_URL a tracker worker's web address" in out.output and "e.g. http://" in out.output


def test_the_trackers_own_error_is_kept_and_a_refusal_names_the_token():
    refusal = json.dumps({"error": "this kmq deployment requires a token"}).encode()
    with serving(403, refusal) as (url, _):
        out = run("stats", "--url", url, "--timeout-s", "5")
    assert out.exit_code == 1 and "HTTP 403 this kmq deployment requires a token (--token / KMQ_TOKEN)" \
        in out.output, out.output
    with serving(404, json.dumps({"error": "queue 'x': not found"}).encode()) as (url, _):
        out = run("stats", "x", "--url", url, "--timeout-s", "5")
    assert out.exit_code == 1 and out.output.endswith("HTTP 404 queue 'x': not found\n"), out.output


def test_a_server_that_does_not_speak_http_is_one_error_line_naming_url():
    # Before: http.client.BadStatusLine, a traceback (e.g. --url at an SSH or a broker port).
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)  # the accept's deadline: the thread ends even if nobody connects

    def answer():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(4096)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        out = run("stats", "--url", f"http://127.0.0.1:{listener.getsockname()[1]}", "--timeout-s", "5")
    finally:
        thread.join(timeout=10)
        listener.close()
    assert out.exit_code == 1 and out.output.count("\n") == 1, out.output
    assert "answered not HTTP (BadStatusLine), not a tracker's JSON: is --url / KMQ_TRACKER_URL" in out.output


def test_a_refused_connection_says_so_without_a_time_it_did_not_wait():
    # An audit: "(tried for 0.0 s; ...)" for a port nothing listens on.
    out = run("stats", "--url", "http://127.0.0.1:1", "--timeout-s", "5")
    assert out.exit_code == 1 and "(--url / KMQ_TRACKER_URL): " in out.output, out.output
    assert "tried for 0.0" not in out.output and "refused" in out.output.lower()

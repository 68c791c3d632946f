"""A tracker worker started for dev, tests and benchmarks (kmq.dev.devstack) whose web port
was taken before it bound starts again on another, and a stranger on its port is never
taken for it."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kmq.dev.devstack import TrackerProcess
from kmq.errors import BrokerUnavailableError


class _Stranger(BaseHTTPRequestHandler):
    """Another process's web view on the port: ready, owning every partition."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({"status": "ok", "pid": 1, "ready": True, "partitions": list(range(64))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stranger():
    """The port of a web server that answers /kmq/health as a ready tracker would."""
    server = HTTPServer(("127.0.0.1", 0), _Stranger)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_a_worker_whose_port_was_taken_starts_on_another_and_a_stranger_is_not_it(make_settings, artifacts,
                                                                                 stranger):
    # Given: the worker's picked port is held by another process's web view.
    log = artifacts / "tracker-port-taken.log"
    t = TrackerProcess(make_settings().replace(web_port=stranger), log).start(wait=False)
    try:
        # Then: the stranger's answers are not our worker's ...
        assert t.health() is None
        # ... and once ours exits for want of its port, it runs on another.
        t.wait_ready(120)
        assert t.settings.web_port != stranger
        assert t.health()["pid"] == t.process.pid
        assert b"address already in use" in log.read_bytes().lower()
    finally:
        t.stop()


@pytest.mark.slow
def test_a_port_the_caller_chose_is_kept_and_its_loss_is_an_error(make_settings, artifacts):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        t = TrackerProcess(make_settings().replace(web_port=port), artifacts / "tracker-port-kept.log",
                           port_attempts=1)
        try:
            with pytest.raises(BrokerUnavailableError, match="tracker worker exited"):
                t.start(timeout_s=120)
            assert t.settings.web_port == port
        finally:
            t.stop()


@pytest.mark.slow
def test_a_start_interrupted_while_waiting_leaves_no_worker_running(make_settings, artifacts):
    # A test run's SIGTERM (turned into KeyboardInterrupt) while start() waits: the caller
    # never gets the handle, so nothing else could end the worker (it was left running).
    t = TrackerProcess(make_settings(), artifacts / "tracker-interrupted.log")
    spawned = []
    spawn = t._spawn

    def spawn_and_note() -> None:
        spawn()
        spawned.append(t.process)

    def interrupted() -> None:
        raise KeyboardInterrupt("signal 15")

    t._spawn = spawn_and_note
    t.health = interrupted
    with pytest.raises(KeyboardInterrupt):
        t.start(timeout_s=120)
    (worker,) = spawned
    assert worker.poll() is not None, "the worker was left running"
    assert t.process is None

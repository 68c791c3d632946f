"""The embedded broker starts on a port nobody else holds, and says so when it cannot."""

from __future__ import annotations

import socket

import pytest

import kmq.dev.embedded as embedded
from kmq.errors import BrokerUnavailableError


@pytest.fixture
def held_port():
    """A port something else listens on (a connect to it succeeds: not the broker)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_a_given_port_in_use_is_a_clear_error_not_a_broker_that_seems_up(held_port, tmp_path):
    broker = embedded.EmbeddedBroker(port=held_port, log_path=tmp_path / "broker.log")
    with pytest.raises(BrokerUnavailableError, match=f"could not bind 127.0.0.1:{held_port}: the port is in use"):
        broker.start()
    assert broker.process is None


def test_a_picked_port_taken_before_the_broker_bound_it_is_picked_again(held_port, tmp_path, monkeypatch):
    picks, pick = [held_port], embedded.free_port
    monkeypatch.setattr(embedded, "free_port", lambda host="127.0.0.1": picks.pop() if picks else pick(host))
    broker = embedded.EmbeddedBroker(log_path=tmp_path / "broker.log")
    assert broker.port == held_port
    with broker:
        assert broker.port != held_port
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
            pass
    assert b"Address in use" in (tmp_path / "broker.log").read_bytes()


def test_clients_are_told_the_advertised_port(tmp_path):
    with embedded.EmbeddedBroker(log_path=tmp_path / "broker.log", advertised_port=12345) as broker:
        assert broker.port != 12345
    assert b"(advertised: tcp://127.0.0.1:12345)" in (tmp_path / "broker.log").read_bytes()


def test_a_picked_port_taken_every_time_is_a_clear_error_after_the_last_attempt(held_port, tmp_path, monkeypatch):
    picks = []
    monkeypatch.setattr(embedded, "free_port", lambda host="127.0.0.1": picks.append(held_port) or held_port)
    broker = embedded.EmbeddedBroker(log_path=tmp_path / "broker.log")
    with pytest.raises(BrokerUnavailableError, match=f"could not bind 127.0.0.1:{held_port}"):
        broker.start()
    assert len(picks) == embedded.PORT_ATTEMPTS and broker.process is None  # the first pick, then two more
    assert (tmp_path / "broker.log").read_bytes().count(b"listening on: ") == embedded.PORT_ATTEMPTS


def test_a_start_interrupted_while_waiting_leaves_no_broker_running(tmp_path, monkeypatch):
    broker = embedded.EmbeddedBroker(log_path=tmp_path / "broker.log")
    spawned = []
    popen = embedded.subprocess.Popen

    def popen_and_note(*args, **kwargs):
        spawned.append(popen(*args, **kwargs))
        return spawned[-1]

    def interrupted(offset: int) -> bytes:
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(embedded.subprocess, "Popen", popen_and_note)
    monkeypatch.setattr(broker, "_log_since", interrupted)
    with pytest.raises(KeyboardInterrupt):
        broker.start()
    (process,) = spawned
    assert process.poll() is not None, "the broker was left running"
    assert broker.process is None

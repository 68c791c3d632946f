"""`kmq worker` without a broker: a dead address, and a handler whose consumer does not open,
are one error line and exit status 1, never `ready` on stdout.

With a broker: tests/integration/test_worker_cli.py (a start that fails after the check).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import kmq
from kmq.dev.embedded import free_port
from kmq.errors import BrokerUnavailableError
from kmq.settings import Settings
from kmq.worker.main import run_worker
from kmq.worker.runner import HandlerRunner

ROOT = Path(__file__).resolve().parents[2]
JOBS = "import kmq\n\n@kmq.handler('emails')\ndef send_email(msg):\n    pass\n"


@pytest.mark.parametrize("extra", [[], ["--processes", "2"]], ids=["one process", "two processes"])
def test_kmq_worker_against_a_dead_broker_is_one_error_line_and_never_ready(tmp_path, extra):
    (tmp_path / "jobs_dead_broker.py").write_text(JOBS)
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kmq.cli", "worker", "jobs_dead_broker",
                          "--bootstrap-servers", address, "--connect-timeout-s", "1", *extra],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert time.monotonic() - t0 < 30, "the worker waited past its --connect-timeout-s"
    assert out.returncode == 1, out
    assert "ready" not in out.stdout, out.stdout
    (line,) = out.stderr.splitlines()  # the parent checks before starting any process
    assert line.startswith(f"error: no Kafka broker answered at {address} (tried for 1."), line


@pytest.fixture
def signal_handlers():
    """run_worker takes SIGTERM and SIGINT; give them back to pytest afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_consumer_that_does_not_open_is_raised_and_the_worker_is_never_ready(
        monkeypatch, capsys, caplog, signal_handlers):
    # Given a handler whose consumer fails to open (the broker went away after the check)
    jobs = types.ModuleType("jobs_unopened")
    jobs.send_email = kmq.handler("emails")(lambda msg: None)
    gone = BrokerUnavailableError("no Kafka broker answered at 127.0.0.1:1 within 15s")

    def fail_to_open(runner):
        raise gone
    monkeypatch.setattr(HandlerRunner, "_open", fail_to_open)
    # When the worker starts, then its error comes back, with no traceback logged and no `ready`
    with caplog.at_level(logging.INFO, logger="kmq.worker"), pytest.raises(BrokerUnavailableError) as raised:
        run_worker(jobs, grace_s=1, settings=Settings.from_env({}, bootstrap_servers="127.0.0.1:1"))
    assert raised.value is gone
    assert "ready" not in capsys.readouterr().out
    assert not [r for r in caplog.records if r.exc_info or '"ready"' in r.getMessage()], caplog.text


def test_kmq_worker_takes_the_connection_options_of_the_other_broker_commands():
    from click.testing import CliRunner

    from kmq.cli import main

    out = CliRunner().invoke(main, ["worker", "--help"])
    assert out.exit_code == 0, out.output
    for option in ("--bootstrap-servers", "--token", "--connect-timeout-s"):
        assert option in out.output

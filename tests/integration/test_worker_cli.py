"""`kmq worker` on a real broker that answers, but where one handler's consumer cannot open:
one error line naming what is missing, exit status 1, and no `ready`, though the other
handler's consumer can open.

Without a broker (a dead address): tests/unit/test_worker_cli.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kmq
from kmq.dev.devstack import settings_env

ROOT = Path(__file__).resolve().parents[2]


def test_a_start_where_one_consumer_does_not_open_is_one_error_line_and_never_ready(
        make_settings, queue, tmp_path):
    # Given a deployment whose deliveries topic is gone: a partition queue's consumer opens,
    # a shared queue's (which reads its deliveries) cannot.
    settings = make_settings()
    with kmq.Client(settings=settings) as client:
        client.configure_queue(f"{queue}-p", dispatch="partition")
        client.configure_queue(f"{queue}-s", dispatch="shared")
    missing = f"{settings.deliveries_topic}-never-created"
    settings = settings.replace(deliveries_topic=missing)
    (tmp_path / "jobs_half_open.py").write_text(
        "import kmq\n\n"
        f"@kmq.handler({queue + '-p'!r})\ndef by_partition(msg):\n    pass\n\n"
        f"@kmq.handler({queue + '-s'!r})\ndef shared(msg):\n    pass\n")
    # When the worker starts
    out = subprocess.run([sys.executable, "-m", "kmq.cli", "worker", "jobs_half_open", "--grace-s", "5",
                          "--log-level", "warning"],
                         env={**settings_env(settings), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # Then it says which topic is missing, once, and never says it is ready
    assert out.returncode == 1, out
    assert "ready" not in out.stdout, out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"topic {missing!r} does not exist" in errors[0], out.stderr


def _port_pair() -> tuple[int, "socket.socket"]:
    """A port P nobody listens on, and a socket holding P + 1 (busy for the worker)."""
    import socket

    from kmq.dev.embedded import free_port
    while True:
        port = free_port()
        held = socket.socket()
        try:
            held.bind(("127.0.0.1", port + 1))
            held.listen()
            return port, held
        except OSError:
            held.close()


def test_processes_with_a_busy_metrics_port_stop_together_with_one_error_line(make_settings, queue, tmp_path):
    # `-p2` (attached) started children that each started two more; with --metrics-port
    # every child bound the same port, one failed with a traceback and the worker ran on
    # with the other, short of a process.
    settings = make_settings()
    (tmp_path / "jobs_two.py").write_text(f"import kmq\n\n@kmq.handler({queue!r})\ndef job(msg):\n    pass\n")
    port, held = _port_pair()
    with held:
        out = subprocess.run([sys.executable, "-m", "kmq.cli", "worker", "jobs_two", "-p2", "--grace-s", "5",
                              "--metrics-port", str(port), "--log-level", "warning"],
                             env={**settings_env(settings), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"--metrics-port {port + 1}" in errors[0], out.stderr
    assert out.stderr.count('"process_failed"') == 1, out.stderr  # two children, not more

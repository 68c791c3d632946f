"""`kmq worker` on a real broker that answers, but where one handler's consumer cannot open:
one error line naming what is missing, exit status 1, and no `ready`, though the other
handler's consumer can open.

Without a broker (a dead address): tests/unit/test_worker_cli.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import kmq
from kmq.dev.devstack import settings_env
from tests.conftest import wait_for

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


def _port_pair() -> tuple[int, socket.socket, socket.socket]:
    """A port P and P + 1, each held by a socket (P to be let go just before the worker
    binds it, so no other test takes it meanwhile; P + 1 stays busy for the worker)."""
    while True:
        low, high = socket.socket(), socket.socket()
        try:
            low.bind(("127.0.0.1", 0))
            port = low.getsockname()[1]
            high.bind(("127.0.0.1", port + 1))
            high.listen()
            return port, low, high
        except OSError:
            low.close()
            high.close()


def test_processes_with_a_busy_metrics_port_stop_together_with_one_error_line(make_settings, queue, tmp_path):
    # `-p2` (attached) started children that each started two more; with --metrics-port
    # every child bound the same port, one failed with a traceback and the worker ran on
    # with the other, short of a process.
    settings = make_settings()
    (tmp_path / "jobs_two.py").write_text(f"import kmq\n\n@kmq.handler({queue!r})\ndef job(msg):\n    pass\n")
    port, low, held = _port_pair()
    with held:
        low.close()  # the worker's first process binds it
        out = subprocess.run([sys.executable, "-m", "kmq.cli", "worker", "jobs_two", "-p2", "--grace-s", "5",
                              "--metrics-port", str(port), "--log-level", "warning"],
                             env={**settings_env(settings), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"--metrics-port {port + 1}" in errors[0], out.stderr
    assert out.stderr.count('"process_failed"') == 1, out.stderr  # two children, not more


def _start_two(settings, queue, tmp_path, name):
    (tmp_path / f"{name}.py").write_text(f"import kmq\n\n@kmq.handler({queue!r})\ndef job(msg):\n    pass\n")
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out, "w") as o, open(err, "w") as e:
        # Its own process group, as a shell gives a job: the group is what Ctrl-C signals.
        p = subprocess.Popen([sys.executable, "-m", "kmq.cli", "worker", name, "--processes", "2",
                              "--grace-s", "5"],
                             env={**settings_env(settings), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
                             stdout=o, stderr=e, cwd=tmp_path, process_group=0)
    try:
        wait_for(lambda: out.read_text().count("ready") == 2, 90, what="both processes ready")
        pids = [json.loads(line.split(" kmq.worker ", 1)[1])["pid"] for line in err.read_text().splitlines()
                if '"event": "ready"' in line]
        assert len(pids) == 2
    except BaseException:  # the test never gets the handle to stop it: the whole group ends here
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        raise
    return p, err, pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_to_a_worker_of_two_processes_drains_them_within_the_grace(make_settings, queue, tmp_path):
    # The children were in the parent's process group: Ctrl-C reached them, then the parent's
    # copy was their second signal, an exit at once (status 1) without the grace.
    p, err, _ = _start_two(make_settings(), queue, tmp_path, "jobs_ctrl_c")
    try:
        os.killpg(p.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        assert p.wait(60) == 0, err.read_text()
    finally:
        if p.poll() is None:
            p.kill()
    log = err.read_text()
    assert "forced_exit" not in log and log.count('"event": "stopped"') == 2, log


def test_the_processes_of_a_worker_whose_parent_was_killed_drain_and_stop(make_settings, queue, tmp_path):
    p, err, pids = _start_two(make_settings(), queue, tmp_path, "jobs_orphaned")
    p.kill()  # SIGKILL: no signal is passed on
    p.wait(10)
    try:
        wait_for(lambda: all(_gone(pid) for pid in pids), 60, what="the orphaned processes to stop")
    finally:
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    log = err.read_text()
    assert log.count('"signal": "parent-gone"') == 2 and log.count('"event": "stopped"') == 2, log

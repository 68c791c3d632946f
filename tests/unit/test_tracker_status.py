"""A harness waiting in vain for its trackers says which worker and why (bench/tracker_status.py)."""

from __future__ import annotations

import subprocess
import sys

from bench import tracker_status
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import free_port
from kmq.settings import Settings


def _tracker(tmp_path, name: str, code: str) -> TrackerProcess:
    t = TrackerProcess(Settings.from_env({}, web_port=free_port()), tmp_path / f"{name}.log")
    (tmp_path / f"{name}.log").write_text("".join(f"{name} line {i}\n" for i in range(20)))
    t.process = subprocess.Popen([sys.executable, "-c", code])
    return t


def test_an_exited_worker_and_a_silent_one_are_named_with_their_logs(tmp_path):
    gone = _tracker(tmp_path, "gone", "raise SystemExit(3)")
    gone.process.wait()
    silent = _tracker(tmp_path, "silent", "import time; time.sleep(60)")
    try:
        text = tracker_status.describe([gone, silent], partitions=2)
    finally:
        silent.process.kill()
        silent.process.wait()
    assert f"tracker0 (pid {gone.process.pid}): exited with 3" in text
    assert f"tracker1 (pid {silent.process.pid}): its web view does not answer" in text
    assert "markers partitions owned by no answering worker: [0, 1]" in text
    assert "gone line 19" in text and "silent line 19" in text and "gone line 7" not in text

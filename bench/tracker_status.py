"""What each tracker worker of a harness run is doing, for a failure message.

A run that waits in vain for its trackers says which worker is not ready and why: its
process gone (with its exit code), its web view not answering (its event loop blocked),
or its ``/kmq/health`` answer (``waiting_for``, the partitions it owns); then the last
lines of its log. Each worker not ready is then asked for its threads' and tasks'
stacks (SIGUSR1, which mode's worker answers in its log, kept with the run's files).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from kmq.dev.devstack import TrackerProcess

LOG_LINES = 12       # lines of a worker's log in the message
STACKS_WAIT_S = 2.0  # how long a worker's log is watched for its stack dump


def describe(trackers: list[TrackerProcess], partitions: int) -> str:
    """One line per worker, the partitions nobody owns, and the logs of those not ready."""
    lines, owned, stuck = [], set(), []
    for k, t in enumerate(trackers):
        rc = None if t.process is None else t.process.poll()
        h = None if rc is not None else t.health()
        if rc is not None:
            lines.append(f"tracker{k} (pid {t.process.pid}): exited with {rc}")
        elif h is None:
            lines.append(f"tracker{k} (pid {t.process.pid}): its web view does not answer")
        else:
            owned.update(h.get("partitions", []))
            lines.append(f"tracker{k} (pid {t.process.pid}): ready={h.get('ready')} "
                         f"waiting_for={h.get('waiting_for')} partitions={h.get('partitions')}")
        if h is None or not h.get("ready"):
            stuck.append(t)
    missing = sorted(set(range(partitions)) - owned)
    if missing:
        lines.append(f"markers partitions owned by no answering worker: {missing}")
    for t in stuck:
        lines.append(f"--- {t.log_path.name}, last {LOG_LINES} lines (its stacks follow there) ---")
        lines.extend(_tail(t.log_path))
    for t in stuck:
        _ask_for_stacks(t)
    return "\n".join(lines)


def _tail(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-LOG_LINES:]
    except OSError as exc:
        return [f"(no log: {exc})"]


def _ask_for_stacks(t: TrackerProcess) -> None:
    """SIGUSR1, then wait (a little) for the log to grow before the harness stops it."""
    if t.process is None or t.process.poll() is not None:
        return
    before = _size(t.log_path)
    t.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + STACKS_WAIT_S
    while _size(t.log_path) == before and time.monotonic() < deadline:
        time.sleep(0.1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

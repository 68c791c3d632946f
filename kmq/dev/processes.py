"""Ending the child processes kmq starts (broker, tracker workers): by their own pid only."""

from __future__ import annotations

import signal
import subprocess


def terminate(p: subprocess.Popen | None, grace_s: float) -> None:
    """SIGTERM ``p``; SIGKILL it if it has not exited after ``grace_s``."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(grace_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()

"""A tracker worker told to stop ends within ``KMQ_STOP_TIMEOUT_S``, whatever its broker does.

Faust's stop waits without a bound for what a broker must answer: an audit (2026-11-29)
stopped the embedded broker (SIGSTOP) and sent a worker SIGTERM; it was still running
130 s and 240 s later, its event loop waiting in the app's stop (its last line "[^--
TrackerRuntime]: Stopping..."), and stopped 2 s after the broker was let go on. Under
compose's 100 s grace period it would have been SIGKILLed with nothing said. Now the
first SIGTERM or SIGINT arms a timer; past it the worker logs why and exits at once with
status 1. It leaves no clean-stop mark, so its next start rebuilds its tables from the
changelog (``app.data_dir``), as after a kill: writes the broker never took are not
trusted.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

import faust

log = logging.getLogger("kmq.tracker")

# How long saying why may take before the exit goes ahead without it: a log handler that
# blocks (a pipe nobody reads, a lock held) must not keep the worker alive. An audit saw
# one worker of 22 SIGTERMed with its broker stopped log no watchdog line and run on
# (killed after 60 s); the cause was not found, this bounds it whatever it is.
SAY_WHY_S = 2.0


class StopWatchdog:
    """Exits the process ``limit_s`` after :meth:`arm` unless it ended before."""

    def __init__(self, limit_s: float, exit_now: Callable[[int], None] = os._exit,
                 say_why_s: float = SAY_WHY_S) -> None:
        self.limit_s = limit_s
        self._exit_now = exit_now
        self._say_why_s = say_why_s
        self._thread: threading.Thread | None = None
        self._cancelled = threading.Event()

    def arm(self) -> None:
        """Start counting (once: a second signal changes nothing here)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="kmq-stop-watchdog", daemon=True)
            self._thread.start()

    def cancel(self) -> None:
        """Tests: stop counting."""
        self._cancelled.set()

    def _watch(self) -> None:
        if self._cancelled.wait(self.limit_s):
            return
        fallback = threading.Timer(self._say_why_s, self._exit_now, (1,))
        fallback.daemon = True
        fallback.start()
        log.error("the worker did not stop within %g s of being told to (KMQ_STOP_TIMEOUT_S; a broker "
                  "that does not answer?): exiting now, status 1; its next start rebuilds its tables "
                  "from the changelog", self.limit_s)
        for handler in logging.getLogger().handlers:
            handler.flush()
        self._exit_now(1)


class TrackerWorker(faust.Worker):
    """faust.Worker whose stop on a signal is bounded by ``app.stop_watchdog``."""

    watchdog: StopWatchdog | None = None  # set by the app before the worker starts

    def _on_sigterm(self) -> None:
        self._arm()
        super()._on_sigterm()

    def _on_sigint(self) -> None:
        self._arm()
        super()._on_sigint()

    def _arm(self) -> None:
        if self.watchdog is not None:
            self.watchdog.arm()

    def _repr_name(self) -> str:
        return "Worker"  # its log lines stay "[^Worker]: ..." (docs/deployment.md: "[^Worker]: Ready")

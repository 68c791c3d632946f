"""The worker's shutdown as a pure state machine (Celery's warm then cold shutdown).

``RUNNING`` --first SIGTERM/SIGINT--> ``DRAINING``: stop receiving, let running handlers
finish until ``grace_s`` has passed, give back prefetched messages, flush settlements,
exit 0. ``DRAINING`` --second signal--> ``FORCED``: exit at once (what was running comes
back after its visibility timeout). Time is an argument.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, replace
from typing import Literal

Phase = Literal["running", "draining", "forced"]


@dataclass(frozen=True)
class Shutdown:
    """Where the shutdown is: its phase and, once draining, when the grace ends."""

    grace_s: float
    phase: Phase = "running"
    grace_ends_at: float | None = None

    def on_signal(self, now: float) -> "Shutdown":
        """The state after one more SIGTERM/SIGINT at ``now``."""
        if self.phase == "running":
            return replace(self, phase="draining", grace_ends_at=now + self.grace_s)
        return replace(self, phase="forced")

    def grace_left_s(self, now: float) -> float:
        """Seconds running handlers may still take (0 once forced or over)."""
        if self.phase == "forced":
            return 0.0
        if self.grace_ends_at is None:
            return float("inf")
        return max(0.0, self.grace_ends_at - now)


class ShutdownSignal:
    """The state machine shared by signal handlers and worker threads."""

    def __init__(self, grace_s: float) -> None:
        self._state = Shutdown(grace_s)
        self._lock = threading.Lock()
        self._signals = itertools.count(1)  # next() is one C call: atomic, even in a nested handler
        self.stopping = threading.Event()   # set at the first signal: stop receiving
        self.forced = threading.Event()     # set at the second: exit now

    @property
    def state(self) -> Shutdown:
        return self._state

    def begin(self, now: float) -> None:
        """Start draining unless a signal came already (never a second signal's force)."""
        with self._lock:
            if self.stopping.is_set():
                return
            self._state = self._state.on_signal(now)
        self.stopping.set()

    def signal(self, now: float, announce_force: bool = True) -> Shutdown:
        """A signal came. ``announce_force=False``: a caller that exits the process itself at
        a second signal; ``forced`` is not set, so no thread wakes to log or flush first.

        A signal's handler runs on the main thread between two of its bytecodes, also inside
        the first signal's handler: a second signal sent right after the first (SIGTERM then
        SIGINT) waited there for the lock the first held, for ever (a CI run's worker hung so).
        Every signal after the first is therefore forced without the lock."""
        if next(self._signals) > 1:
            state = self._state = replace(self._state, phase="forced")
        else:
            with self._lock:  # against begin() on another thread
                self._state = self._state.on_signal(now)
                state = self._state
        self.stopping.set()
        if state.phase == "forced" and announce_force:
            self.forced.set()
        return state

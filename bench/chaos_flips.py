"""Mode flips of a chaos run (bench/chaos.py ``--flip-modes``): when each queue's mode changes,
and the thread that changes it.

A queue's mode is one of ``partition`` (its consumers form a consumer group), ``shared``
(the tracker dispatches, ``ordering="none"``) and ``ordered`` (the tracker dispatches,
``ordering="group"``), changed at run time with ``configure_queue`` (docs/shared-queues.md
"Changing the mode at run time", docs/ordering.md "Changing the ordering setting").

:func:`flip_schedule` is pure: given a seed, the flips of one queue, every ``every_s``
seconds (uniform between the two bounds) to a mode other than the current one, and
``second_pct`` percent of them followed within 100 ms by a second flip (the setting
written again before the first one has reached the consumers and the dispatcher).

:class:`Flipper` makes one queue's flips on its own thread and its own client: a switch
to partition mode makes the next change wait for the tracker's handover (up to 10 s,
``HANDOVER_WAIT_S``), and the chaos loop's sends and kills go on meanwhile. It notes every
flip (when it was asked, when ``configure_queue`` returned), which the ledger reads the
ordered periods by (bench/chaos_periods.py), and ends in ``final_mode``: the drain runs
on a shared queue.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import kmq
from kmq.errors import KmqError
from kmq.settings import Settings

MODES = ("partition", "shared", "ordered")
# What configure_queue is told for each mode: a flip sets both, so no mode keeps the other's half.
MODE_SETTINGS = {"partition": {"dispatch": "partition", "ordering": "none"},
                 "shared": {"dispatch": "shared", "ordering": "none"},
                 "ordered": {"dispatch": "shared", "ordering": "group"}}
SECOND_FLIP_WITHIN_S = 0.1


@dataclass(frozen=True)
class Flip:
    """One planned change: at ``at_s`` seconds into the chaos phase, to ``mode``."""

    at_s: float
    mode: str


def flip_schedule(seed: int, span_s: float, every_s: tuple[float, float] = (1.0, 5.0),
                  modes: tuple[str, ...] = MODES, second_pct: float = 30.0,
                  first_mode: str = "shared") -> list[Flip]:
    """One queue's flips within ``span_s`` seconds (see the module docstring); the queue is in
    ``first_mode`` before the first. Each flip changes the mode; the same seed, the same plan."""
    rng = random.Random(seed)
    out: list[Flip] = []
    current, t = first_mode, 0.0
    while True:
        t += rng.uniform(*every_s)
        if t >= span_s:
            return out
        current = rng.choice([m for m in modes if m != current])
        out.append(Flip(round(t, 3), current))
        if rng.uniform(0, 100) < second_pct:
            current = rng.choice([m for m in modes if m != current])
            out.append(Flip(round(t + rng.uniform(0, SECOND_FLIP_WITHIN_S), 3), current))


class Flipper:
    """Makes one queue's planned flips, then ``final_mode`` (see the module docstring)."""

    def __init__(self, settings: Settings, queue: str, schedule: list[Flip], final_mode: str = "shared") -> None:
        self.s = settings
        self.queue = queue
        self.schedule = list(schedule)
        self.final_mode = final_mode
        # {"queue", "mode", "asked", "returned" (epoch s), "error"}: what was done, in order
        self.flips: list[dict] = []
        self._stop = threading.Event()
        self._final = True
        self._thread = threading.Thread(target=self._run, name=f"flips-{queue}", daemon=True)
        self._start = 0.0

    def start(self, start_monotonic: float) -> "Flipper":
        """Flips at their times after ``start_monotonic`` (the chaos phase's start)."""
        self._start = start_monotonic
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        """Every planned flip made (and the final one)."""
        return self._thread.ident is not None and not self._thread.is_alive()

    def finish(self, final: bool = True, timeout_s: float = 60.0) -> None:
        """Skips the flips not made yet; ``final``: the queue is left in ``final_mode`` first."""
        self._final = final
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        client = kmq.Client(settings=self.s)
        mode: str | None = "shared"  # the harness configures its queues shared
        try:
            for flip in self.schedule:
                if self._stop.wait(max(0.0, self._start + flip.at_s - time.monotonic())):
                    break
                mode = self._flip(client, flip.mode)
            if self._final and mode != self.final_mode:
                self._flip(client, self.final_mode)
        finally:
            client.close()

    def _flip(self, client: kmq.Client, mode: str) -> str | None:
        """One change, noted; the mode it left the queue in (None: it failed, mode unknown)."""
        asked = time.time()
        try:
            client.configure_queue(self.queue, **MODE_SETTINGS[mode])
            error = None
        except KmqError as exc:  # noted, and the ledger's ordered periods leave it out
            error = f"{type(exc).__name__}: {exc}"
        self.flips.append({"queue": self.queue, "mode": mode, "asked": round(asked, 3),
                           "returned": round(time.time(), 3), "error": error})
        return None if error else mode

"""When the tick timer proposes a TICK to a markers partition (pure: time is an argument).

A TICK runs at its own time (:func:`kmq.protocol.expiry.tick_time`): the log's
order decides between an ack and a deadline. So a TICK on its way covers only
the deadlines up to its stamp, and a deadline that passes while it travels needs
a TICK of its own: the timer proposes one at its next round while something is
due, instead of waiting until the first was read (a whole trip more). At most
``MAX_IN_FLIGHT`` are on their way at once, so a partition whose agent lags (a
backlog after an assignment) is not flooded; TICKs not read within ``RETRY_MS``
(lost in a rebalance) are given up and proposed anew.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_IN_FLIGHT = 4
RETRY_MS = 5000


@dataclass(slots=True)
class TickProposals:
    """One owned partition's TICKs on their way (the timer's and the agent's shared view)."""

    in_flight: int = 0
    sent_ms: int = 0  # stamp of the newest TICK proposed
    ran_ms: int = 0  # when a TICK last ran here

    def propose(self, now_ms: int, next_deadline_ms: int | None, idle_ms: int) -> bool:
        """Whether to propose a TICK stamped ``now_ms``; records it if so."""
        if self.in_flight and now_ms - self.sent_ms >= RETRY_MS:
            self.in_flight = 0  # lost: never read
        due = next_deadline_ms is not None and next_deadline_ms <= now_ms
        if self.in_flight:
            go = due and self.in_flight < MAX_IN_FLIGHT and now_ms > self.sent_ms
        else:
            go = due or now_ms - self.ran_ms >= idle_ms
        if go:
            self.in_flight += 1
            self.sent_ms = now_ms
        return go

    def ran(self, at_ms: int) -> None:
        """A TICK was read and run at ``at_ms`` (maybe a predecessor's: never below 0)."""
        self.in_flight = max(0, self.in_flight - 1)
        self.ran_ms = at_ms

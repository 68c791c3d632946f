"""Dedup ids read back from the log when a dispatcher begins (docs/ordering.md, "Across a
failover").

A queue partition's dedup state (``kmq.protocol.dedup.Dedup``) lives in its dispatcher's
memory, so a successor (a failover, a tracker restart, an epoch begun anew after a failed
write) knew none of the ids its predecessors had seen, and handed out a repeated send
whose first they had delivered. Now, at a queue partition's first want after BEGIN, the
dispatcher reads back from where the last ``REPLAY_WINDOWS`` dedup windows began
(``offsets_for_times``; at most ``REPLAY_MAX_RECORDS`` below the cursor) up to its cursor
as of BEGIN, and feeds those records' dedup ids to ``Dedup`` only: nothing of it is
handed out and the cursor does not move. Then the queue goes on as before.

Two windows, not one: a send inside the last window whose first came up to a window
before it is judged against that first, as the predecessor judged it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable

from kmq.protocol.dispatch import Want

REPLAY_WINDOWS = 2
REPLAY_MAX_RECORDS = 200_000   # offsets read back per queue partition, at most (~1.3 s here)
REPLAY_ROUND_RECORDS = 20_000  # a queue's records taken per dispatch round while reading back


@dataclass(slots=True)
class Replay:
    """One queue partition's read-back: from ``at`` up to ``until`` (its cursor at BEGIN)."""

    until: int
    begun_wall_ms: int
    at: int | None = None  # where it reads next; None: not placed yet

    def start(self, floor: int, window_ms: int, offset_at: Callable[[int], int]) -> int | None:
        """Where to read next (placed at the first call: ``offset_at(wall ms)`` is the
        partition's first offset stamped at or after it; ``floor``: where the queue's
        records on the partition begin), or None once done."""
        if self.at is None:
            since_ms = self.begun_wall_ms - REPLAY_WINDOWS * window_ms
            self.at = max(floor, self.until - REPLAY_MAX_RECORDS, offset_at(since_ms))
        return self.at if self.at < self.until else None

    def took(self, w: Want) -> list:
        """The records ``w`` took below ``until`` (to feed to Dedup); what it took from
        ``until`` on is left where it is, for the queue's own hand-out."""
        taken = w.taken
        cut = len(taken)
        if taken and taken[-1].offset() >= self.until:
            cut = bisect_left(list(map(type(taken[0]).offset, taken)), self.until)
        if cut < len(taken) or w.cursor > self.until:
            w.cursor = self.until
        self.at = w.cursor
        return taken[:cut]


def replays_at_begin(cursors: dict[tuple[str, int], int], wall_ms: int) -> dict[tuple[str, int], Replay]:
    """A read-back for every queue partition with records below its cursor at BEGIN."""
    return {qp: Replay(cursor, wall_ms) for qp, cursor in cursors.items() if cursor > 0}

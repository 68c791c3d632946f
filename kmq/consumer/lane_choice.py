"""When a shared consumer moves to another lane; pure, time passed in.

A shared consumer picks its lane at random, and reads every record written to it: its
own deliveries and any other consumer's that picked the same lane (skipped by key, but
fetched). With C busy consumers on L lanes a consumer fetches about 1 + (C - 1) / L times
what it is delivered, and the few that share a lane far more: 97 consumers on 256 lanes,
median 1.00 but up to 3.0-4.9 (docs/shared-queues.md, "Read amplification"). An idle
consumer on a busy lane fetches a busy consumer's whole stream for nothing.

So a consumer counts what its lane brought it, its own records' bytes and the others',
and moves to another lane when the others' exceed :data:`MAX_OTHERS_SHARE` of its own
after at least :data:`MIN_OTHER_BYTES` of them (a fetched / delivered ratio above 1.5,
the issue's goal). Which lane: of :data:`CANDIDATES` picked at random, the one whose end
grew least over :data:`SAMPLE_S` (:func:`quietest`): a lane picked blindly is busy as often
as the share of lanes in use (97 busy consumers on 256 lanes: a third). Moves are spaced: the first
may come :data:`FIRST_MOVE_AFTER_S` after the consumer started, each next one twice as
long after the last, up to :data:`MAX_MOVE_GAP_S`, so a fleet with more busy consumers
than lanes (where sharing cannot be avoided) settles instead of moving for ever.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Collection

MIN_OTHER_BYTES = 256 * 1024  # others' bytes read on a lane before it is judged
MAX_OTHERS_SHARE = 0.5        # others' bytes per own byte above which the lane is left
FIRST_MOVE_AFTER_S = 1.0      # the earliest move after the consumer started
MAX_MOVE_GAP_S = 64.0         # the longest wait between two moves
CANDIDATES = 4                # lanes whose ends are looked at before a move ...
SAMPLE_S = 0.1                # ... twice, this long apart


@dataclass(slots=True)
class LaneWatch:
    """When a consumer took its lane, how often it moved, and where the window the lane is
    judged on began (the lane reader's byte totals then: kmq.consumer.lane_reader)."""

    taken_at_s: float
    moves: int = 0
    own_at: int = 0
    other_at: int = 0

    def gap_s(self) -> float:
        """How long after taking its lane the consumer may leave it."""
        return min(MAX_MOVE_GAP_S, FIRST_MOVE_AFTER_S * 2 ** self.moves)

    def judge(self, now_s: float, own_bytes: int, other_bytes: int) -> bool:
        """Whether to leave the lane, given the bytes read on it so far (totals since it was
        taken: this consumer's records and the others'). A window holds at least
        MIN_OTHER_BYTES of others' records; one that shows the lane mostly ours starts the
        next, so a neighbour that arrives late is judged on what came since."""
        own, other = own_bytes - self.own_at, other_bytes - self.other_at
        if other < MIN_OTHER_BYTES or now_s - self.taken_at_s < self.gap_s():
            return False
        if other > MAX_OTHERS_SHARE * own:
            return True
        self.own_at, self.other_at = own_bytes, other_bytes
        return False

    def moved(self, now_s: float) -> None:
        """A new lane was taken (its reader counts from 0): the next move waits twice as long."""
        self.moves += 1
        self.taken_at_s = now_s
        self.own_at = self.other_at = 0


def pick_lane(count: int, avoid: Collection[int] = (), rng: random.Random | None = None) -> int | None:
    """A lane at random among ``count``, none of ``avoid``; None when every lane is in it."""
    r = rng or random
    avoided = sorted({lane for lane in avoid if 0 <= lane < count})
    if len(avoided) >= count:
        return None
    lane = r.randrange(count - len(avoided))
    for a in avoided:  # the lane-th of the lanes not avoided, in order
        if lane >= a:
            lane += 1
    return lane


def candidates(count: int, avoid: Collection[int], rng: random.Random | None = None) -> list[int]:
    """Up to :data:`CANDIDATES` distinct lanes at random, none of ``avoid``."""
    out: list[int] = []
    for _ in range(CANDIDATES):
        lane = pick_lane(count, set(avoid) | set(out), rng)
        if lane is None:
            break
        out.append(lane)
    return out


def quietest(before: dict[int, int], after: dict[int, int], rng: random.Random | None = None) -> int | None:
    """The lane whose end grew least between two looks (ends as lane -> offset; a lane
    missing from either look is not a candidate); ties broken at random."""
    grown = {lane: after[lane] - before[lane] for lane in before if lane in after}
    if not grown:
        return None
    least = min(grown.values())
    return (rng or random).choice(sorted(lane for lane, g in grown.items() if g == least))

"""The consumer's keepalive round: which held messages to extend, which have lapsed.

KIP-62's split (seed 004): the visibility timeout detects a dead consumer;
``max_processing_s`` bounds how long user code may hold a message. A live
consumer extends every message it holds, prefetched ones without limit and
ones in user code while a later round could still be needed, so a message's
last extension lands at or after ``handed_at + max_processing_s`` (never
early, at most one round late). Once that deadline has surely passed, the
tracker has taken the message back: it has *lapsed* and stops counting
against ``max_in_flight``. A range not extended for longer than the visibility
timeout (the process stalled: kmq.consumer.stale) is the tracker's already: its
prefetched messages are not extended (the receiving thread drops them) and those
in user code lapse at once, instead of late EXTENDs. While user code is away
(kmq.consumer.user_code) what it has not taken is not extended either: it goes back
with the message user code holds, to consumers that work. On an ordered queue the prefetched rest of a group's
run stops being extended once its message in user code is past its last
extension: the group's next message may not go out before it, so it comes back
with it (a timeout) instead of waiting in a hung consumer, and with it its whole
group (docs/ordering.md). Pure: time is an argument.
"""

from __future__ import annotations

from typing import Callable

from kmq.protocol import markers as M
from kmq.consumer.held import HeldRange
from kmq.consumer.stale import is_stale
from kmq.protocol.masks import mask_of as rels_mask


def keepalive_interval_s(visibility_s: float) -> float:
    """How often a consumer's keepalive round runs: often enough that a live consumer's
    messages never lapse (a quarter of the visibility timeout, 50 ms to 5 s)."""
    return max(0.05, min(visibility_s / 4, 5.0))


def extension_budget_s(visibility_s: float, max_processing_s: float, interval_s: float) -> float:
    """How long after its hand-out (or an explicit extend's end minus the visibility) a message
    in user code is still extended: its last EXTEND lands at or after ``max_processing_s``."""
    return max_processing_s - visibility_s + interval_s


def keepalive_round(held_ranges: list[HeldRange], *, now: float, visibility_s: float,
                    max_processing_s: float, interval_s: float, timeout_ms: int,
                    group_of: Callable[[HeldRange, int], bytes | None] | None = None,
                    read_ahead: bool = True) -> tuple[list[M.Marker], int]:
    """EXTEND markers for what to keep invisible, and how many messages lapsed now.

    Lapsed messages are recorded on their range (``lapsed``, ``outstanding``). An extended
    range's ``extended_at`` is the caller's to set, to ``now``, once its EXTEND is written:
    an EXTEND decided and never sent (the process stalled between) kept nothing invisible.
    ``group_of(range, index)``: an ordered queue's group of a message (None: none), for
    the runs' rule above. ``read_ahead`` False: user code is away (kmq.consumer.user_code),
    what it has not taken is not extended.
    """
    budget = extension_budget_s(visibility_s, max_processing_s, interval_s)
    lapse_after = max_processing_s + 2 * interval_s
    out: list[M.Marker] = []
    lapsed = 0
    overdue = set() if group_of is None else _overdue_groups(held_ranges, now, visibility_s, budget, group_of)
    for held in held_ranges:
        handed_at = held.handed_at()
        rels = []
        stalled = now - held.kept_at > visibility_s
        keep_read_ahead = read_ahead and not is_stale(held, now, visibility_s)
        for i, rel in enumerate(held.rels):
            if held.state[rel] or rel in held.lapsed:
                continue
            if i >= len(handed_at):  # prefetched, not yet in user code
                if keep_read_ahead and (not overdue or group_of(held, i) not in overdue):
                    rels.append(rel)
                continue
            # An explicit extend() counts as a fresh hand-out at its end minus the visibility.
            hold = held.holds.get(rel, 0.0)
            if stalled and hold <= now:
                held.lapsed.add(rel)
                held.outstanding -= 1
                lapsed += 1
                continue
            age = now - max(handed_at[i], hold - visibility_s)
            if age <= budget:
                if hold <= now + visibility_s:
                    rels.append(rel)
                continue
            if age > lapse_after:
                # Same thread as the drain: a verb recorded before or after this
                # point is counted exactly once (see Consumer._settled_in).
                held.lapsed.add(rel)
                held.outstanding -= 1
                lapsed += 1
        if rels:
            out.append(M.Extend(held.ref, rels_mask(rels, held.ref.length), timeout_ms))
    return out, lapsed


def _overdue_groups(held_ranges: list[HeldRange], now: float, visibility_s: float, budget: float,
                    group_of: Callable[[HeldRange, int], bytes | None]) -> set[bytes]:
    """Groups with a message in user code past its last extension (lapsed, or past the
    budget): the rest of their runs, in whichever range, is not extended. A run that goes
    on at its consumer comes in more than one range; a lapsed message stays in user code."""
    out: set[bytes] = set()
    for held in held_ranges:
        for i, t in enumerate(held.handed_at()):
            rel = held.rels[i]
            if held.state[rel]:
                continue
            hold = held.holds.get(rel, 0.0)
            if rel in held.lapsed or now - max(t, hold - visibility_s) > budget:
                group = group_of(held, i)
                if group is not None:
                    out.add(group)
    return out

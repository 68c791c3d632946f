"""Whether a shared queue's user code is *away*: holding a message its consumer gave up on.

The keepalive extends a message in user code until ``max_processing_s`` is nearly spent
(kmq.consumer.keepalive); past that point, its *give-up*, the tracker will take it back
and redeliver it. User code that has neither asked for a message (a receive) nor settled
one since the give-up of a message it holds is hung or overrunning (KIP-62's case for
``max.poll.interval.ms``, seed 004): its consumer asks the dispatcher for nothing more
(kmq.consumer.credits) and stops extending the read-ahead user code has not taken
(kmq.consumer.keepalive), until user code is back; what it held goes back with the
message, to consumers that work. Else the dispatcher kept handing it messages, its
message's own redeliveries among them, that waited there unhandled: measured, an ordered
queue's hung head went back to its hung consumer twice and was dead-lettered at
``max_deliveries`` 3 while another consumer of the queue idled
(tests/integration/test_ordered_consumers.py), and an unordered queue's copy and
read-ahead stayed at the hung consumer for as long as it lived
(tests/integration/test_shared_unread.py).

One busy thread of several is not away: the others' receives (a thread waiting in one,
however long: the caller's to check) and settlements say user code is there. Pure: time is
an argument.
"""

from __future__ import annotations

from kmq.consumer.held import HeldRange
from kmq.consumer.keepalive import extension_budget_s


def give_up_s(visibility_s: float, max_processing_s: float, interval_s: float) -> float:
    """How long after its hand-out (or an explicit extend's end minus the visibility) a
    message in user code is last extended: kmq.consumer.keepalive's budget, at least one
    keepalive round (with ``max_processing_s`` under the visibility timeout it is never
    extended; user code holding it one round is not away yet)."""
    return max(extension_budget_s(visibility_s, max_processing_s, interval_s), interval_s)


def user_code_away(held_ranges: list[HeldRange], *, now: float, active_at: float, visibility_s: float,
                   max_processing_s: float, interval_s: float) -> bool:
    """Whether a message user code holds (handed out, not settled; lapsed ones too: they
    stay in user code) reached its give-up after ``active_at``, user code's last receive
    or settlement, and by ``now``."""
    if now <= active_at:
        return False
    budget = give_up_s(visibility_s, max_processing_s, interval_s)
    for held in held_ranges:
        holds, state, rels = held.holds, held.state, held.rels
        for i, handed_at in enumerate(held.handed_at()):
            rel = rels[i]
            if state[rel]:
                continue
            give_up = max(handed_at, holds.get(rel, 0.0) - visibility_s) + budget
            if active_at < give_up <= now:
                return True
    return False

"""The settlement log: verbs recorded by any thread, turned into one marker per range.

``Message.ack()`` sets its range's state byte and names the range here, other verbs
append themselves (deques: appends are thread-safe and cheap, which matters on the ack
hot path); the consumer's flusher drains the log every ``flush_interval_s`` into
aggregated markers: one ACK per range with the bit mask of every offset acked since the
last drain (read from the state bytes), and one RELEASE / REJECT / EXTEND per
(range, verb, argument). Pure: no Kafka, no clock.
"""

from __future__ import annotations

import threading
from collections import deque
from itertools import repeat, starmap
from typing import TYPE_CHECKING, Any, Callable

from kmq.message import Verb
from kmq.protocol import markers as M
from kmq.protocol.masks import mask_of as rels_mask

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.held import HeldRange


class SettlementLog:
    """Verbs of one consumer not yet sent; :meth:`drain` turns them into markers."""

    __slots__ = ("acks", "ack_runs", "verbs", "wake", "wake_at")

    def __init__(self) -> None:
        # Acks are state bytes of their range (HeldRange.state); these deques name the
        # ranges that have new ones: one entry per Message.ack (so len(acks) counts them)
        # and one per MessageBatch.ack.
        self.acks: deque = deque()       # HeldRange, appended by Message.ack
        self.ack_runs: deque = deque()   # HeldRange, appended by MessageBatch.ack
        self.verbs: deque = deque()      # (Message, Verb, argument)
        # Set when the log stops being empty (and by whoever needs the flusher now), and
        # when it holds ``wake_at`` acks (a shared consumer's refill point).
        self.wake = threading.Event()
        self.wake_at = 1 << 62

    def __bool__(self) -> bool:
        return bool(self.acks or self.ack_runs or self.verbs)

    def add(self, message: Any, verb: Verb, arg: Any) -> None:
        """Record a verb other than ack (any thread)."""
        if not self.verbs:
            self.wake.set()
        self.verbs.append((message, verb, arg))

    def add_run(self, held: "HeldRange") -> None:
        """Record that ``held`` has a run of new acks in its state (any thread)."""
        if not self.ack_runs:
            self.wake.set()
        self.ack_runs.append(held)

    def drain(self, settled: Callable[["HeldRange", int], int]) -> tuple[list[M.Marker], dict[str, int]]:
        """Markers for everything recorded so far, and counts per verb for the stats
        (``by-user-code``: the verbs user code recorded, every one but RETURN).

        ``settled(held, mask)`` is told which relative offsets of a range were settled (by
        every verb but EXTEND) and returns how many of them still counted as held.
        """
        # The ranges named so far, once each, in order; popped in C (no Python step per
        # ack). An ack whose entry comes after these is in its range's state already or
        # is taken at the next drain.
        ranges = dict.fromkeys(starmap(self.acks.popleft, repeat((), len(self.acks))))
        ranges.update(dict.fromkeys(starmap(self.ack_runs.popleft, repeat((), len(self.ack_runs)))))
        out: list[M.Marker] = []
        counts = {"acked": 0, "released": 0, "rejected": 0, "settled": 0, "by-user-code": 0}
        for held in ranges:
            mask = held.take_acks() & ~held.settled_sent
            if mask:
                held.settled_sent |= mask
                out.append(M.Ack(held.ref, mask))
                counts["acked"] += settled(held, mask)
                counts["by-user-code"] += mask.bit_count()
        grouped: dict[tuple[Any, Verb, Any], list[int]] = {}
        pop = self.verbs.popleft
        try:
            while True:
                m, verb, arg = pop()
                grouped.setdefault((m[1], verb, arg), []).append(m[2])
        except IndexError:
            pass
        settled_verbs = 0
        for (held, verb, arg), rels in grouped.items():
            mask = rels_mask(rels, held.ref.length)
            if verb is not Verb.RETURN:  # a RETURN is the consumer's own: never in user code
                counts["by-user-code"] += len(rels)
            if verb is Verb.EXTEND:
                out.append(M.Extend(held.ref, mask, arg))
                continue
            mask &= ~held.settled_sent  # settled already by a racing verb (HeldRange.settled_sent)
            if not mask:
                continue
            held.settled_sent |= mask
            if verb is Verb.RELEASE:
                out.append(M.Release(held.ref, mask, arg))
                counts["released"] += mask.bit_count()
            elif verb is Verb.RETURN:
                out.append(M.Release(held.ref, mask, 0, counted=False))
            else:
                out.append(M.Reject(held.ref, mask, arg))
                counts["rejected"] += mask.bit_count()
            settled_verbs += settled(held, mask)
        counts["settled"] = counts["acked"] + settled_verbs
        return out, counts

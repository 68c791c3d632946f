"""The settlement log: verbs recorded by any thread, turned into one marker per range.

``Message.ack()`` and friends append here (deques: appends are thread-safe and cheap,
which matters on the ack hot path); the consumer's flusher drains the log every
``flush_interval_s`` into aggregated markers: one ACK per range with the bit mask of
every offset acked since the last drain, and one RELEASE / REJECT / EXTEND per
(range, verb, argument). Pure: no Kafka, no clock.
"""

from __future__ import annotations

import threading
from collections import deque
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
        self.acks: deque = deque()       # Message objects, appended by Message.ack
        self.ack_runs: deque = deque()   # (held, lo_rel, hi_rel) from MessageBatch.ack
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

    def add_run(self, held: "HeldRange", lo: int, hi: int) -> None:
        """Record an ack of the relative offsets ``[lo, hi)`` of ``held`` (any thread)."""
        if not self.ack_runs:
            self.wake.set()
        self.ack_runs.append((held, lo, hi))

    def drain(self, settled: Callable[["HeldRange", Any], int]) -> tuple[list[M.Marker], dict[str, int]]:
        """Markers for everything recorded so far, and counts per verb for the stats.

        ``settled(held, rels)`` is told which relative offsets of a range were settled (by
        every verb but EXTEND) and returns how many of them still counted as held.
        """
        by_range: dict[Any, list[int]] = {}
        pop = self.acks.popleft
        last_held = None
        rels: list[int] = []
        try:
            while True:
                m = pop()
                held = m[1]
                if held is not last_held:  # acks mostly come in runs of one range
                    rels = by_range.get(held)
                    if rels is None:
                        rels = by_range[held] = []
                    last_held = held
                rels.append(m[2])
        except IndexError:
            pass
        masks: dict[Any, int] = {}
        counts = {"acked": 0, "released": 0, "rejected": 0, "settled": 0}
        for held, rels in by_range.items():
            masks[held] = rels_mask(rels, held.ref.length)
            counts["acked"] += settled(held, rels)
        pop = self.ack_runs.popleft
        try:
            while True:  # MessageBatch.ack(): whole runs of offsets at once
                held, lo, hi = pop()
                masks[held] = masks.get(held, 0) | (((1 << (hi - lo)) - 1) << lo)
                counts["acked"] += settled(held, range(lo, hi))
        except IndexError:
            pass
        out: list[M.Marker] = [M.Ack(held.ref, mask) for held, mask in masks.items()]
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
            if verb is Verb.EXTEND:
                out.append(M.Extend(held.ref, mask, arg))
                continue
            if verb is Verb.RELEASE:
                out.append(M.Release(held.ref, mask, arg))
                counts["released"] += len(rels)
            elif verb is Verb.RETURN:
                out.append(M.Release(held.ref, mask, 0, counted=False))
            else:
                out.append(M.Reject(held.ref, mask, arg))
                counts["rejected"] += len(rels)
            settled_verbs += settled(held, rels)
        counts["settled"] = counts["acked"] + settled_verbs
        return out, counts


"""A shared consumer's deliveries held: copies and referred ranges into the consumer's
held ranges, within its free room (mixed into :class:`kmq.consumer.shared_source.SharedSource`,
which reads them).

What is beyond the free room (possible for a moment after a tracker failover) is given
back at once, uncounted; copies below the queue's purge point are acked unseen; a range
the consumer holds already is left out, counted (``stats["duplicate-deliveries"]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kmq.consumer import referred
from kmq.consumer.credits import nothing as _nothing
from kmq.protocol import deliveries as D
from kmq.protocol import envelope
from kmq.protocol import markers as M
from kmq.protocol.masks import mask_of as rels_mask

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.shared_source import SharedSource


class DeliveriesHeld:
    """:meth:`_hold` and :meth:`_hold_ref` of a :class:`SharedSource`."""

    def _hold_ref(self: "SharedSource", d: D.Delivery, got: list, sent_at: float) -> int:
        """Hold a referred range's records that are ours, at most the free room (the rest
        is given back at once, uncounted, as in :meth:`_hold`); return how many."""
        c, r = self._c, d.range
        keep, rels = referred.ours(got, r, d.mask, self._key_of_queue)
        with c._lock:
            if self._held_already(r):
                keep, rels = [], []
            room = max(0, c.max_in_flight - c._in_flight)
            if len(keep) > room:
                c._writer.send([M.Release(r, rels_mask(list(rels[room:]), r.length), 0, counted=False)], [],
                               on_confirmed=_nothing)
                keep, rels = keep[:room], rels[:room]
            if keep:
                c._hold(r, keep, rels, sent_at)
            self._receipts.held(d.epoch, d.seq)
        if not keep:
            return 0
        self._received(len(keep))
        return len(keep)

    def _hold(self: "SharedSource", d: D.Delivery, copies: list, sent_at: float) -> int:
        """Hold a delivery's copies (offsets in mask order); return how many.

        Copies below the queue's purge point (dispatched before the purge was known) are
        acked unseen; copies beyond the free room (possible for a moment after a tracker
        failover) are given back at once, uncounted.
        """
        c = self._c
        if not copies:
            with c._lock:
                self._receipts.held(d.epoch, d.seq)
            return 0
        r = d.range
        rels = _rels(d.mask)[:len(copies)]
        floor = c._purged_before.get(r.partition, 0)
        purged = sum(1 for rel in rels if r.start + rel < floor)
        with c._lock:
            if self._held_already(r):
                self._receipts.held(d.epoch, d.seq)
                return 0
            room = max(0, c.max_in_flight - c._in_flight)
            keep = rels[purged:purged + room]
            extra = rels[purged + len(keep):]
            markers: list[M.Marker] = []
            if purged:
                markers.append(M.Ack(r, rels_mask(rels[:purged], r.length)))
            if extra:
                markers.append(M.Release(r, rels_mask(extra, r.length), 0, counted=False))
            if keep:
                if c._gate is None and _in_a_run(copies[purged]):
                    # The dispatcher hands this queue out in runs: it is ordered, though the
                    # consumer has not read that change yet. Ungated, the rest of a run went
                    # to user code past a released head (a configure_queue, then sends at once).
                    c._gate_on()
                c._hold(r, copies[purged:purged + len(keep)], keep, sent_at)
                self._received(len(keep))
            self._receipts.held(d.epoch, d.seq)
            if markers:
                c._writer.send(markers, [], on_confirmed=_nothing)
        return len(keep)

    def _held_already(self: "SharedSource", r: M.RangeRef) -> bool:
        """Whether the consumer holds range ``r`` already (lock held): a second delivery of
        it (a forged copy, or one handed out again) is left out, counted. Held again, it
        replaced the first in the consumer's table, whose messages then never left
        ``in_flight``: an audit's 12 copies of one range left 9 of 10 slots taken for good."""
        if r not in self._c._held:
            return False
        self._c.stats["duplicate-deliveries"] = self._c.stats.get("duplicate-deliveries", 0) + 1
        return True


def _in_a_run(copy: Any) -> bool:
    """Whether a lane copy carries its run's id (only an ordered queue's do)."""
    return any(k == envelope.RUN for k, _ in copy.headers() or ())


def _rels(mask: int) -> list[int]:
    """Relative offsets of a mask, ascending (bytewise)."""
    return M.mask_offsets(0, mask)

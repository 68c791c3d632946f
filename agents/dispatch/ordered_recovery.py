"""An ordered queue partition's recovery when its dispatcher begins (docs/ordering.md,
"Failover"): what the predecessors handed out, and reading up to the partition's end as
of BEGIN before anything goes out. Part of :class:`agents.dispatch.ordered.OrderedQueues` (a mixin;
runs in the dispatcher's thread only)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kmq.protocol import handed as H

if TYPE_CHECKING:  # pragma: no cover
    from agents.dispatch.ordered import Key, OrderedQueues

log = logging.getLogger("kmq.tracker.dispatcher")


@dataclass
class _Recovery:
    """What a dispatcher that began learned of its predecessors' hand-outs (BEGIN)."""

    handed: H.HandedOut
    pending: set[int]   # handed out and still in flight in the tracker's table
    until: int          # the partition's end as of BEGIN: read to here before handing out
    # where the hand-outs end within the log (the bitmap's end, at most the partition's end
    # as of BEGIN: a forged ACQUIRE past it held a handover that read to it forever)
    hand_outs_end: int = 0
    catching_up: bool = True
    # message id -> (group, offset of its first record) of records handed out and settled:
    # a copy read later (republished before BEGIN) is in its group's run, placed there
    settled: dict[str, tuple[bytes, int]] = field(default_factory=dict)


class Recovering:
    """:meth:`recover_partition`, :meth:`recover`, :meth:`not_handed`, :meth:`past_handed`,
    :meth:`unread_hand_outs`, :meth:`unread_from`, :meth:`recovered` and :meth:`caught_up` of
    :class:`~agents.dispatch.ordered.OrderedQueues`."""

    def recover_partition(self: "OrderedQueues", m: int, handed: dict, end_offset: Any,
                          ordered: set[str] | None = None) -> None:
        """BEGIN on markers partition ``m``: its queue partitions that were ever ordered resume
        from what the predecessor handed out (``(queue, p) -> (HandedOut, pending)``);
        ``end_offset(p, default)`` reads a queue partition's end; ``ordered``: the queues
        ordered now (None: all). A queue no longer ordered resumes from its FLOOR too (the
        cursor of when it was ordered): it skips what the bitmap says went out
        (:meth:`not_handed`)."""
        for (q, p), (h, pending) in handed.items():
            # Everything republished before BEGIN is below this end (the tracker settles
            # after republishing), so a returned head is read before its group goes on.
            log_end = end_offset(p, default=0)  # 0: not known (a broker blip), or empty
            until = max(log_end, h.end)
            now_ordered = ordered is None or q in ordered
            self.recover((m, q, p), h, pending, until, now_ordered, min(h.end, log_end) if log_end else h.end)
            if now_ordered or h.mask:  # an unordered queue's bitmap left from long ago: not news
                log.info("markers partition %d: %s queue %s/%d resumes with %d handed out above "
                         "its floor (%d in flight), reading to %d first", m,
                         "ordered" if now_ordered else "formerly ordered", q, p, h.mask.bit_count(),
                         len(pending), until)

    def recover(self: "OrderedQueues", key: "Key", handed: H.HandedOut, pending: frozenset[int], until: int,
                ordered: bool = True, hand_outs_end: int | None = None) -> None:
        """A new epoch begins: its predecessors handed out ``handed`` (``pending`` of it
        still in flight); nothing of the queue goes out before it is read up to ``until``
        (the partition's end as of BEGIN), so a head republished before is seen first.
        ``hand_outs_end``: where the hand-outs end within the log (default: the bitmap's end)."""
        q = self._queue(key)
        q.ordered = ordered
        q.recovery = _Recovery(handed, set(pending), until,
                               handed.end if hand_outs_end is None else hand_outs_end)

    def not_handed(self: "OrderedQueues", key: "Key", records: list) -> list:
        """Of records read for the queue as an unordered queue's (in offset order), those no
        predecessor handed out while it was ordered: its cursor after a BEGIN is that
        FLOOR, below runs handed out and acked since (an audit: 262 delivered again after
        mode flips and a rebalance). One in flight is the tracker's to redeliver, as for any
        unordered queue. The predecessor's hand-outs are forgotten once a read begins past
        them (records not handed out this round are read again from the first of them)."""
        q = self._queues.get(key)
        r = None if q is None else q.recovery
        if r is None or not records:
            return records
        if records[0].offset() >= r.handed.end:
            q.recovery = None
            return records
        return [rec for rec in records if not r.handed.handed(rec.offset())]

    def past_handed(self: "OrderedQueues", key: "Key", cursor: int) -> int:
        """Where a switch to partition mode hands the queue over, from the dispatcher's
        ``cursor``: past the offsets from it on that a predecessor handed out while the queue
        was ordered (after a BEGIN the cursor is that FLOOR; an audit's group re-read 116
        acked messages). Only the unbroken run at the cursor: a gap may be another queue's
        record or one never handed out, and the group must read those."""
        q = self._queues.get(key)
        r = None if q is None else q.recovery
        if r is None:
            return cursor
        while cursor < r.handed.end and r.handed.handed(cursor):
            cursor += 1
        return cursor

    def unread_hand_outs(self: "OrderedQueues") -> list[tuple["Key", int]]:
        """(key, end) of each queue partition whose predecessors' hand-outs are not all read
        again yet: ``end`` is the end of them."""
        return [(key, q.recovery.hand_outs_end) for key, q in self._queues.items() if q.recovery is not None]

    def unread_from(self: "OrderedQueues", key: "Key", cursor: int) -> bool:
        """Predecessors handed out records of the queue partition at or above ``cursor``."""
        q = self._queues.get(key)
        return q is not None and q.recovery is not None and cursor < q.recovery.hand_outs_end

    def recovered(self: "OrderedQueues", key: "Key") -> None:
        """Everything predecessors handed out was read again: nothing more to skip."""
        q = self._queues.get(key)
        if q is not None:
            q.recovery = None

    def caught_up(self: "OrderedQueues", key: "Key", read_cursor: int) -> bool:
        """Whether heads may go out: after a BEGIN, only once the queue is read up to the
        partition's end as of BEGIN (or its window is full)."""
        q = self._queues.get(key)
        r = None if q is None else q.recovery
        if r is None:
            return True
        if r.catching_up and (read_cursor >= r.until or self.room(key, read_cursor) == 0):
            r.catching_up = False
        if read_cursor >= max(r.until, r.handed.end):
            q.recovery = None  # nothing a predecessor handed out is left to read
        return not r.catching_up


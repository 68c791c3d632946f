"""Records in: what the dispatcher read of an ordered queue partition goes to its groups
(docs/ordering.md). Each record's headers say its message id, group and dedup id: a send
repeated within the dedup window is dropped, one a predecessor dispatcher handed out is
adopted in flight or known settled (``kmq.protocol.handed``), the rest is offered to
``kmq.protocol.ordering.GroupOrder`` and kept waiting for its group. Part of
:class:`agents.dispatch.ordered.OrderedQueues` (a mixin; runs in the dispatcher's thread
only).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from kmq.protocol import envelope
from kmq.protocol import handed as H
from kmq.protocol.chunk import record_size
from kmq.protocol.ordering import valid_group

if TYPE_CHECKING:  # pragma: no cover
    from agents.dispatch.ordered import Key, OrderedQueues


class Feeding:
    """:meth:`feed` of :class:`~agents.dispatch.ordered.OrderedQueues`."""

    def feed(self: "OrderedQueues", key: "Key", records: list, dedup_window_ms: int, now_ms: int) -> None:
        """Records of the queue read in offset order: offered to their groups, or dropped
        as duplicates of a send inside the dedup window."""
        q = self._get(key, dedup_window_ms)
        if not q.ordered and q.records:  # ordered again before all it released went out
            records = [q.records.pop(o) for o in sorted(q.records)] + records
            q.heap, q.held_bytes = [], 0
        q.ordered = True
        p = key[2]
        for rec in records:
            offset = rec.offset()
            ours, _ = envelope.split(rec.headers())
            raw_id = ours.get(envelope.ID)
            msg_id = envelope.kept_id(raw_id, p, offset)
            raw_dedup = ours.get(envelope.DEDUP_ID)
            if raw_dedup is not None and self._duplicate(q, p, rec, raw_dedup, rec.headers() or []):
                continue  # never handed out: nothing to settle
            raw_group = ours.get(envelope.GROUP)
            group = valid_group(raw_group)
            if group is None:
                if raw_group is not None:
                    self.stats["bad-group"] += 1
                group = ("", msg_id)  # a group of its own; its redelivery is known by id
            returned_from = None
            r = q.recovery
            if r is not None:
                st = H.status(r.handed, r.pending, offset)
                first = r.settled.get(msg_id)
                first_offset = first[1] if first is not None and first[0] == group else None
                if st == H.IN_FLIGHT:  # its group waits for it, as it did for the predecessor
                    q.order.adopt(offset, msg_id, group, now_ms, first_offset)
                    continue
                if st == H.SETTLED:  # never again; a copy of it read later is in its group's run
                    r.settled.setdefault(msg_id, (group, offset))  # its first record: its place
                    continue
                returned_from = first_offset if raw_dedup is None else None  # a send is no copy
            if raw_dedup is not None and q.order.holds(group, msg_id):
                # Sent again after its dedup window while the first is not settled: the same
                # id would name two messages of the group (a copy is known by id).
                self.stats["deduplicated"] += 1
                continue
            if q.order.offer(offset, msg_id, group, now_ms, returned_from) != "known":
                if offset not in q.records:
                    q.held_bytes += record_size(rec)
                q.records[offset] = rec
                heapq.heappush(q.heap, offset)

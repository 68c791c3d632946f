"""The tracker's deadlines out (5. in the README flow): what has come due, and forgetting it
once acted on. A mixin of :class:`kmq.protocol.state.PartitionState`, through its ``store``,
``_get``, ``_store_range`` and work budget; pure like it (time is ``now_ms``).

``due(now_ms)`` lists what has come due, in deadline order, reading only; the tracker
republishes or dead-letters it, and only then calls ``settle(...)`` so a crash in between
repeats the work instead of losing it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kmq.protocol import entries as E
from kmq.protocol.due import Due, DueSend, Expiry, StaleIndexKey
from kmq.protocol.entries import Cause, InFlight
from kmq.protocol.markers import RangeRef
from kmq.protocol.masks import lowest_bits

if TYPE_CHECKING:  # pragma: no cover
    from kmq.protocol.state import PartitionState


class Deadlines:
    """:meth:`next_deadline_ms`, :meth:`due` and :meth:`settle` of
    :class:`~kmq.protocol.state.PartitionState`."""

    def next_deadline_ms(self: "PartitionState") -> int | None:
        """The earliest deadline held, or None when nothing is pending."""
        first = self.store.index_first()
        return None if first is None else E.decode_index_key(first)[0]

    def due(self: "PartitionState", now_ms: int, limit: int = 1 << 62) -> list[Due]:
        """What is due at ``now_ms``, earliest first, ``limit`` messages at most.

        However large one range is, an expiry is cut to the room left (its
        lowest offsets first); the rest stays due for the next call, as does
        what lies past the work budget. Reads only; pass the result to
        :meth:`settle` once it has been acted on.
        """
        out: list[Due] = []
        taken = 0
        work_until = self.work_bytes + self.work_budget_bytes
        for ikey in self.store.index_scan(now_ms):
            if taken >= limit or (out and self.work_bytes > work_until):
                break
            deadline_ms, key = E.decode_index_key(ikey)
            raw = self._get(key)
            if raw is None:
                out.append(StaleIndexKey(ikey))
                continue
            if E.is_range_key(key):
                entry = E.decode_inflight(raw)
                if entry.indexed_ms != deadline_ms:
                    out.append(StaleIndexKey(ikey))
                    continue
                found = _expiries(E.decode_range_key(key), entry, now_ms)
            else:
                queue, message_id = E.decode_schedule_key(key)
                s = E.decode_scheduled(raw)
                if s.indexed_ms != deadline_ms:
                    out.append(StaleIndexKey(ikey))
                    continue
                found = [DueSend(queue, message_id, s.due_ms, s.value, s.headers)]
            for d in found:
                room = limit - taken
                if room <= 0:
                    break
                if d.count > room:  # a slice: the rest of the group stays due
                    d = replace(d, mask=lowest_bits(d.mask, room))
                out.append(d)
                taken += d.count
        return out

    def settle(self: "PartitionState", done: list[Due],
               deferred: dict[RangeRef, list[tuple[int, int]]] | None = None) -> None:
        """Forget what :meth:`due` returned, now that it was republished or dead-lettered.

        ``deferred`` maps a range to ``(mask, deadline_ms)`` pairs of its expired
        offsets that wait out a backoff instead: they stay, due again later.
        """
        deferred = deferred or {}
        for d in done:
            if isinstance(d, StaleIndexKey):
                self.store.index_delete(d.key)
                continue
            if isinstance(d, DueSend):
                key = E.schedule_key(d.queue, d.message_id)
                raw = self._get(key)
                if raw is not None:
                    self.store.delete(key)  # entry first, then its index key: see Store
                    self.store.index_delete(E.index_key(E.decode_scheduled(raw).indexed_ms, key))
                continue
            key = E.range_key(d.range)
            raw = self._get(key)
            if raw is None:
                continue
            entry = E.decode_inflight(raw)
            entry.attempt_offset = entry.attempt_dlq_offset = -1  # the attempt is complete
            waits = deferred.get(d.range, ())
            keep = 0
            for mask, deadline_ms in waits:
                keep |= entry.move(mask & d.mask, deadline_ms, Cause.DEFERRED)
            entry.remove(d.mask & ~keep)
            self._store_range(key, entry)


def _expiries(r: RangeRef, e: InFlight, now_ms: int) -> list[Expiry]:
    merged: dict[tuple[Cause, str], Expiry] = {}
    for g in e.groups:
        if g.deadline_ms <= now_ms:
            k = (g.cause, g.reason)
            prev = merged.get(k)
            merged[k] = Expiry(r, g.mask | (prev.mask if prev else 0), g.cause, g.reason,
                               e.started_ms, min(g.deadline_ms, prev.deadline_ms) if prev else g.deadline_ms)
    return [merged[k] for k in sorted(merged)]

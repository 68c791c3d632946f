"""What a shared queue's dispatcher reads from a partition's state when it BEGINs: its
epoch, the cursors, and the ordered queues' handed-out offsets (docs/shared-queues.md,
docs/ordering.md "Failover"). A mixin of :class:`kmq.protocol.state.PartitionState`:
reads only, through its ``store``."""

from __future__ import annotations

from kmq.protocol import entries as E
from kmq.protocol.handed import HandedOut
from kmq.protocol.masks import mask_offsets
from kmq.protocol.store import Store


class DispatchView:
    """Reads of the dispatcher's durable state (epoch, cursors, handed-out bitmaps)."""

    store: Store
    markers_partition: int

    def _get(self, key: bytes) -> bytes | None:  # pragma: no cover - PartitionState's
        raise NotImplementedError

    def epoch(self) -> int:
        """The epoch of this partition's current dispatcher (0: none began yet)."""
        raw = self.store.get(E.epoch_key(self.markers_partition))
        return 0 if raw is None else E.decode_epoch(raw)

    def cursors(self) -> dict[tuple[str, int], int]:
        """(queue, queue partition) -> offset below which the queue's records were fetched or
        dispatched: where a dispatcher that begins now starts reading."""
        out = {}
        for key in self.store.scan_prefix(E.CURSOR_PREFIX):
            raw = self.store.get(key)
            if raw is not None:
                out[E.decode_cursor_key(key)] = E.decode_offset(raw)
        return out

    def handed_out(self, queue: str, partition: int) -> HandedOut | None:
        """The ordered queue partition's offsets handed out above its floor (None: no
        ordered ACQUIRE of it applied)."""
        raw = self._get(E.handed_key(queue, partition))
        return None if raw is None else E.decode_handed(raw)

    def handed_outs(self) -> dict[tuple[str, int], tuple[HandedOut, frozenset[int]]]:
        """(queue, queue partition) -> (offsets handed out above the floor, those of them
        still pending in the table), for every ordered queue partition: what a dispatcher
        that begins now must not hand out again (docs/ordering.md, "Failover")."""
        out = {}
        for key in self.store.scan_prefix(E.HANDED_PREFIX):
            raw = self.store.get(key)
            if raw is None:
                continue
            queue, p = E.decode_handed_key(key)
            h = E.decode_handed(raw)
            pending = set()
            for rkey in self.store.scan_prefix(E.range_partition_prefix(queue, p)):
                rraw = self.store.get(rkey)
                if rraw is None:
                    continue
                r = E.decode_range_key(rkey)
                if r.end <= h.base or r.start >= h.end:
                    continue
                pending.update(o for o in mask_offsets(r.start, E.decode_inflight(rraw).pending) if h.handed(o))
            out[(queue, p)] = (h, frozenset(pending))
        return out

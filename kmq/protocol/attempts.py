"""Where a republishing attempt began, recorded before it (so a successor after a crash
finds what the attempt already wrote instead of writing it twice). A mixin of
:class:`kmq.protocol.state.PartitionState`, through its ``_get``/``_put``."""

from __future__ import annotations

from kmq.protocol import entries as E
from kmq.protocol.due import DueSend
from kmq.protocol.markers import RangeRef


class Attempts:
    """The attempt offsets of due ranges and due scheduled sends."""

    def _get(self, key: bytes) -> bytes | None:  # pragma: no cover - PartitionState's
        raise NotImplementedError

    def _put(self, key: bytes, value: bytes) -> None:  # pragma: no cover - PartitionState's
        raise NotImplementedError

    def mark_attempts(self, sends: list[DueSend], end_offsets: dict[DueSend, int]) -> None:
        """Record, before publishing, where each due send's target partition ended.

        ``end_offsets`` maps each send -> a lower bound of its target partition's end.
        """
        for d in sends:
            key = E.schedule_key(d.queue, d.message_id)
            raw = self._get(key)
            if raw is None:
                continue
            entry = E.decode_scheduled(raw)
            if entry.attempt_offset < 0:
                entry.attempt_offset = end_offsets[d]
                self._put(key, E.encode_scheduled(entry))

    def range_attempt(self, r: RangeRef) -> tuple[int, int]:
        """Where an earlier republishing attempt of ``r`` began (queue, dead-letter), or -1s."""
        raw = self._get(E.range_key(r))
        if raw is None:
            return -1, -1
        e = E.decode_inflight(raw)
        return e.attempt_offset, e.attempt_dlq_offset

    def mark_range_attempts(self, ranges: list[RangeRef], ends: dict[RangeRef, tuple[int, int]]) -> None:
        """Record, before republishing, where the target partitions ended (see InFlight)."""
        for r in ranges:
            key = E.range_key(r)
            raw = self._get(key)
            if raw is None:
                continue
            e = E.decode_inflight(raw)
            if e.attempt_offset < 0:
                e.attempt_offset, e.attempt_dlq_offset = ends[r]
                self._put(key, E.encode_inflight(e))

    def attempt_offset(self, d: DueSend) -> int:
        """Where an earlier publishing attempt of ``d`` started looking, or -1."""
        raw = self._get(E.schedule_key(d.queue, d.message_id))
        return -1 if raw is None else E.decode_scheduled(raw).attempt_offset

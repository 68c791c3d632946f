"""What the web views and metrics read of a dispatcher (any thread, no locks: a view
that races a change sees it on its next call)."""

from __future__ import annotations

import time
from typing import Any


class DispatcherViews:
    """Mixed into :class:`agents.dispatch.dispatcher.Dispatcher`: read-only views of its state."""

    _parts: dict[int, Any]
    stats: dict[str, int]
    _ordered: Any
    _reader: Any

    def snapshot(self) -> dict:
        """Live consumers per shared queue and the dispatcher's counters."""
        consumers = {}
        for part in list(self._parts.values()):
            for q, roster in list(part.rosters.items()):
                consumers[q] = len(roster.slots)
        held_bytes, held_records = self.held()
        return {"consumers": consumers, **self.stats, **self._ordered.stats,
                "held-bytes": held_bytes, "held-records": held_records}

    def held_bytes(self) -> int:
        return self.held()[0]

    def held(self) -> tuple[int, int]:
        """Value and header bytes, and records, kept read and not handed out (read ahead, and
        an ordered queue's waiting for their groups): bounded per queue partition."""
        try:
            queues = [qa for la in (list(self._reader.ahead.values()) if self._reader is not None else [])
                      for qa in list(la.queues.values())]
            ordered_bytes, ordered_records = self._ordered.held()
            return (sum(qa.bytes for qa in queues) + ordered_bytes,
                    sum(len(qa.records) for qa in queues) + ordered_records)
        except RuntimeError:  # changed while we looked: the next call sees it
            return 0, 0

    def group_gauges(self) -> dict[str, dict[str, int]]:
        """Per ordered queue: groups waiting, in flight, oldest head age (ms)."""
        try:
            return self._ordered.gauges(int(time.monotonic() * 1000))
        except RuntimeError:  # changed while we looked: the next call sees it
            return {}

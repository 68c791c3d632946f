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
        return {"consumers": consumers, **self.stats, **self._ordered.stats, "held-bytes": self.held_bytes()}

    def held_bytes(self) -> int:
        """Value and header bytes of the records kept read and not handed out (read ahead, and
        an ordered queue's waiting for their groups): bounded per queue partition."""
        try:
            ahead = list(self._reader.ahead.values()) if self._reader is not None else []
            return (sum(qa.bytes for la in ahead for qa in list(la.queues.values()))
                    + self._ordered.held_bytes())
        except RuntimeError:  # changed while we looked: the next call sees it
            return 0

    def group_gauges(self) -> dict[str, dict[str, int]]:
        """Per ordered queue: groups waiting, in flight, oldest head age (ms)."""
        try:
            return self._ordered.gauges(int(time.monotonic() * 1000))
        except RuntimeError:  # changed while we looked: the next call sees it
            return {}

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

    def snapshot(self) -> dict:
        """Live consumers per shared queue and the dispatcher's counters."""
        consumers = {}
        for part in list(self._parts.values()):
            for q, roster in list(part.rosters.items()):
                consumers[q] = len(roster.slots)
        return {"consumers": consumers, **self.stats, **self._ordered.stats}

    def group_gauges(self) -> dict[str, dict[str, int]]:
        """Per ordered queue: groups waiting, in flight, oldest head age (ms)."""
        try:
            return self._ordered.gauges(int(time.monotonic() * 1000))
        except RuntimeError:  # changed while we looked: the next call sees it
            return {}

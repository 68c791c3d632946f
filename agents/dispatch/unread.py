"""Deliveries a live consumer has not read yet, kept invisible by the dispatcher.

A shared consumer asks for work ahead of its user code (its read-ahead) and reads its lane
only when user code receives. A delivery that reaches the lane while user code is busy
with what it has would time out there, unread, and come back with its delivery count
spent: a handler that took longer than the visibility timeout burned the deliveries of
everything sent meanwhile (found by a docs audit: a worker's retried message dead-lettered
after five timeouts without once being handled). The consumer's CREDITs say which
deliveries it has read (their sequence numbers); the rest, the dispatcher extends
(:meth:`kmq.protocol.dispatch.Roster.extensions`) while the consumer's lease lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from agents.dispatch.dispatcher import Dispatcher

UNREAD_CHECK_S = 0.05  # how often the rosters are looked through for extensions due


class DispatcherUnread:
    """:meth:`_extend_unread` of :class:`agents.dispatch.dispatcher.Dispatcher`."""

    _next_unread_check_s = 0.0

    def _extend_unread(self: "Dispatcher", now_s: float) -> None:
        """Write the EXTENDs due for unread deliveries (while this worker is surely a member:
        an extension from a worker that lost the partition would only delay a redelivery)."""
        if now_s < self._next_unread_check_s or now_s >= self._membership():
            return
        self._next_unread_check_s = now_s + UNREAD_CHECK_S
        now_ms = int(now_s * 1000)
        for m, part in self._parts.items():
            if not part.ready:
                continue
            due = [e for roster in part.rosters.values() for e in roster.extensions(now_ms)]
            if due:
                self._lanes.extend(m, due)
                self.stats["unread-extends"] += len(due)

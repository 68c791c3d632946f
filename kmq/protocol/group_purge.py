"""What a queue purge, or letting held heads go, does to an ordered queue partition's
groups, and their gauges: the part of :class:`kmq.protocol.ordering.GroupOrder` that
reads or drops whole groups (a mixin; pure, like it)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kmq.protocol.ordering import GroupOrder


class PurgeAndGauges:
    """:meth:`purge_below`, :meth:`release_held` and :meth:`gauges` of
    :class:`~kmq.protocol.ordering.GroupOrder`."""

    def release_held(self: "GroupOrder") -> int:
        """The queue's ``dead_letter_head`` is "continue" now: every message held as a
        dead-lettered head leaves its run, as under "continue" at its dead-lettering, and its
        group goes on. (Held, it waited for a redrive; purging its dead letter, or the
        topic's retention, took the only copy: an audit's group stayed held for good, and
        setting "continue" did not free it.) Returns how many were let go."""
        if not self.held:
            return 0
        released = 0
        for group, g in list(self._groups.items()):
            gone = [m for m in g.run if m.held]
            if not gone:
                continue
            head = g.run[0].held
            for m in gone:
                g.leave(m)
            released += len(gone)
            if not g.run:
                self._disown(group, g)
                if not g.waiting:
                    self._ready.pop(group, None)
                    del self._groups[group]
                    continue
            if head:
                g.since_ms = self._head_read_ms(g)
            self._update(group, g)
        self.held = 0
        return released

    def purge_below(self: "GroupOrder", offset: int) -> int:
        """The queue was purged below ``offset`` (its purge point): forget those records.

        Records waiting below it are never handed out. A message handed out (at a consumer,
        or gone to be republished) or dead-lettered and held from below it leaves its run:
        the tracker forgot it at the purge, so no settle and no republish comes. A copy
        read at or above the point stays, as does every record at or above it (sent after
        the purge), with their order. Returns how many records and messages were dropped."""
        dropped = 0
        for group, g in list(self._groups.items()):
            kept: deque = deque()
            for o, msg_id in g.waiting:
                if o >= offset:
                    kept.append((o, msg_id))
                else:
                    self._forget(o)
                    dropped += 1
            g.waiting = kept
            g.waiting_ids = {msg_id for _, msg_id in kept}
            run = []
            for m in g.run:
                if m.offset is not None and m.offset < offset:
                    del self._in_flight[m.offset]
                    self._forget(m.offset)
                elif m.back is not None and m.back < offset:
                    self._forget(m.back)
                elif m.held and m.handed_from < offset:
                    self.held -= 1
                else:
                    run.append(m)
                    continue
                dropped += 1
            if len(run) < len(g.run) or not run:
                self._disown(group, g)
            g.run = run
            g.ids = {m.msg_id: m for m in run}
            if not run and not kept:
                self._ready.pop(group, None)
                del self._groups[group]
                continue
            if not run:
                g.since_ms = self._offered_ms.get(kept[0][0], 0)
            self._update(group, g)
        return dropped

    def gauges(self: "GroupOrder", now_ms: int) -> dict[str, int]:
        """Groups with messages waiting, groups in flight (a run not over), of those the
        groups held by a dead-lettered message, and the oldest head's age in ms (0: none)."""
        waiting = in_flight = held = 0
        oldest = None
        for g in self._groups.values():
            if g.run:
                in_flight += 1
                if self.held and any(m.held for m in g.run):
                    held += 1
            elif g.waiting:
                waiting += 1
            if oldest is None or g.since_ms < oldest:
                oldest = g.since_ms
        return {"groups_waiting": waiting, "groups_in_flight": in_flight, "groups_held": held,
                "oldest_head_age_ms": 0 if oldest is None else max(0, now_ms - oldest)}

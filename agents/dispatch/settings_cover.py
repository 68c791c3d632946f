"""Records carrying a group, taken for a queue the dispatcher's view says is unordered:
handed out only below where that view is known current (kmq.protocol.view_freshness;
docs/ordering.md, "Sends right after the change"). Part of
:class:`agents.dispatch.dispatcher.Dispatcher` (a mixin; its thread only)."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from operator import methodcaller
from typing import Any, Callable

from agents.dispatch.epochs import OwnedPartition
from agents.dispatch.reader import NO_END, QueueReader
from kmq.ops.queues_topic import QueueConfigs
from kmq.protocol.dispatch import Want
from kmq.protocol.view_freshness import ViewFreshness
from kmq.queue_config import QueueConfig

log = logging.getLogger("kmq.tracker.dispatcher")
LAPSE_LOG_S = 10.0  # a view stuck behind is logged at most this often
_OFFSET = methodcaller("offset")


class SettingsCover:
    """:meth:`_settings_cover`, :meth:`_view_overdue` and :meth:`_hold_uncovered` of the dispatcher."""

    _configs: QueueConfigs
    _freshness: ViewFreshness
    _reader: QueueReader
    _overdue_logged_s: float
    settings: Any
    stats: dict
    _dispatchable: Callable[[str], QueueConfig | None]

    def _settings_cover(self, queue: str, p: int, cfg: QueueConfig, last: int) -> int:
        """Records carrying a group were taken for ``queue`` as an unordered queue's, up to
        offset ``last``: the offset of queue partition ``p`` below which the view of the
        queues topic is known to hold every change made before they were sent, and still
        says ``cfg`` (0: none; kmq.protocol.view_freshness: ``configure_queue(q,
        ordering="group")`` and sends right after it)."""
        view, fresh, now_s = self._configs, self._freshness, time.monotonic()
        below = fresh.covered_below(p, view.applied())
        if below <= last:
            if self._view_overdue(fresh, now_s):
                below = NO_END
            elif fresh.may_ask():
                read_to = self._reader.read_to()  # before the ask: all of it was in the log
                ends = self._reader.ends_of(self.settings.queues_topic, view.partitions)
                self.stats["settings-checks"] += 1
                if ends is not None:
                    fresh.asked(read_to, ends, now_s)
                    below = fresh.covered_below(p, view.applied())
        return below if self._dispatchable(queue) == cfg else 0

    def _view_overdue(self, fresh: ViewFreshness, now_s: float) -> bool:
        """The view stays behind (its follower cannot read the topic): say so, hold nothing."""
        if not fresh.overdue(now_s):
            return False
        if now_s - self._overdue_logged_s >= LAPSE_LOG_S:
            self._overdue_logged_s = now_s
            log.warning("the queues topic view has not caught up for %.0f s: records carrying a group "
                        "go out as the view's settings say", now_s - fresh.behind_since_s)
        return True

    def _hold_uncovered(self, w: Want, part: OwnedPartition, p: int, below: int) -> None:
        """What ``w`` took at or above ``below`` is not handed out: it stays read ahead (the
        trim keeps it) and is taken again next round, as the settings say then."""
        if w.taken[-1].offset() < below:
            return
        k = bisect_left(w.taken, below, key=_OFFSET)
        w.cursor = w.taken[k].offset()
        part.cursors[(w.queue, p)] = w.cursor  # past only other queues' records
        w.taken = w.taken[:k]
        self.stats["held-for-settings"] += 1

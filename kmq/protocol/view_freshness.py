"""Which records read may go out as a view of the queues topic says? Pure.

A queue's settings reach the dispatcher through its view of the queues topic
(:class:`kmq.ops.queues_topic.QueueConfigs`), which follows the topic a fetch wait behind.
``configure_queue(q, ordering="group")`` followed at once by sends of one group had the
dispatcher hand the sends out as an unordered queue's (a released head was overtaken by
the rest of its group: 3 of 3 tries, the README's own example). A change written before a
record was sent is on the topic before the record is. So once the view has applied the
topic up to ends asked for *after* the reader had read a queue partition up to offset
``o``, the view holds every change made before any record below ``o`` was sent, whatever
the clocks of the machines say.

:class:`ViewFreshness` keeps, per queue partition, the offset below which records are
covered so; the caller asks the ends (a ListOffsets of the topic) and passes in how far it
had read each partition then, the view's applied offsets and the time. Records above the
cover wait; those below go out, so a steady flow is not held up by its newest records. A
view that stays behind what was asked for ``STALE_LIMIT_S`` (its follower cannot read:
the broker gone for it) holds nothing back any more (:meth:`ViewFreshness.overdue`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

STALE_LIMIT_S = 10.0  # a view this long behind what was asked no longer holds records back


@dataclass
class ViewFreshness:
    """Per queue partition, the offset below which records are covered (see the module
    docstring), and the ask not answered yet."""

    covered: dict[int, int] = field(default_factory=dict)  # queue partition -> covered below
    asked_read: dict[int, int] | None = None  # queue partition -> read up to, when the ends were asked
    asked_ends: dict[int, int] | None = None  # queues topic partition -> its end, as asked
    behind_since_s: float | None = None  # when the first ask not applied yet was made

    def covered_below(self, partition: int, applied: dict[int, int]) -> int:
        """Records of ``partition`` below this offset may go out as the view says
        (``applied``: the view's offset below which it applied each topic partition)."""
        if self.asked_ends is not None and all(applied.get(p, 0) >= end for p, end in self.asked_ends.items()):
            for p, offset in self.asked_read.items():
                self.covered[p] = max(self.covered.get(p, 0), offset)
            self.asked_read = self.asked_ends = self.behind_since_s = None
        return self.covered.get(partition, 0)

    def may_ask(self) -> bool:
        """True if no ask waits for its answer. One at a time: were a pending ask replaced by
        each newer read's, settings written faster than the view follows would cover
        nothing ever; this way each answer covers what was read before its ask."""
        return self.asked_read is None

    def asked(self, read_to: dict[int, int], ends: dict[int, int], now_s: float) -> None:
        """The topic's ``ends``, asked at ``now_s`` once each queue partition had been read
        up to ``read_to``."""
        self.asked_read, self.asked_ends, self.behind_since_s = dict(read_to), dict(ends), now_s

    def overdue(self, now_s: float, limit_s: float = STALE_LIMIT_S) -> bool:
        """True if the view has been behind what was asked for ``limit_s`` or more."""
        return self.behind_since_s is not None and now_s - self.behind_since_s >= limit_s

"""Changelog records Faust fetched but never handed to table recovery are fetched again.

faust-streaming 0.15.3's ``Consumer.getmany`` drops records it fetched when the flow
stopped or the generation changed while they were on their way, or mid-batch (recovery
pauses the flow at each phase and rebalance). For stream topics it then seeks back to
the committed offsets; a changelog partition has none, so aiokafka's position stays past
the dropped records and nothing reads them again. A standby replica started from an
empty table lost its whole first fetch that way: it held only what the changelog got
after it started, and a worker promoted from it knew nothing of the messages in flight
before (the shared chaos run lost 20 of them: their ACQUIREs' entries were in the
changelog, in the other worker's replica, and not in the new owner's table).

So each ``getmany`` call notes the changelog records it fetched and the ones it handed
on; a partition with records dropped is sought back to the first of them, unless
something moved it since (a rebalance's recovery seeks it itself). A record handed on can
still be dropped: Faust's drain gives up a record's hand-over when the flow is suspended
while it waits (room in a full buffer, a paused flow) and goes on past it;
``app.drain_fast_path`` notes those (``_kmq_cut``), and they count as dropped too, with
every later record of that changelog partition in the fetch, held back (:func:`in_order`):
recovery would ignore the cut record fetched again behind them.

A record handed on could still be thrown away before recovery took it: Faust's changelog
queue, between the drain and recovery, is emptied whenever the flow is resumed
(``clear_on_resume``; a full queue's waiting puts are cancelled too), and recovery
resumes the flow when it completes, after the standbys' fetches began. Recovery takes at
most one record off the queue per turn of the event loop, the drain puts up to a hundred,
so on a busy worker that resume threw away the standby records queued so far, and
recovery went on with those put after them: the replica had a gap for good, and a worker
promoted from it lacked the delayed sends in it (test_standby_replicas.py failed so in a
loaded CI run). A resume now leaves the changelog queue as it is
(:func:`keep_on_resume`): what it holds was fetched since the last rebalance, in order,
and recovery still needs it. A rebalance and a stop still empty it (they suspend the flow
first) and recovery then seeks each partition to what it applied.
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator, Container, Mapping

log = logging.getLogger("kmq.tracker.tables")

Key = tuple[str, int]  # (topic, partition)


def dropped(fetched: Mapping[Key, list[int]], handed: Mapping[Key, int],
            cut: Mapping[Key, int] | None = None) -> dict[Key, tuple[int, int]]:
    """Per partition with records fetched and not handed on: (the first of them, the
    position the fetch left the partition at). ``fetched``: the offsets of one fetch, in
    order, per partition; ``handed``: the last offset handed on per partition (records of
    a partition are handed on in offset order, so the rest were dropped); ``cut``: the
    first record per partition whose hand-over was given up (``app.drain_fast_path``)."""
    out = {}
    cut = cut or {}
    for key, offsets in fetched.items():
        if not offsets:
            continue
        last = handed.get(key)
        rest = offsets if last is None else [o for o in offsets if o > last]
        firsts = rest[:1] + ([cut[key]] if key in cut else [])
        if firsts:
            out[key] = (min(firsts), offsets[-1] + 1)
    return out


async def in_order(fetched: AsyncIterator[tuple[Any, Any]], cut: Mapping[Key, int], changelogs: Container[str],
                   handed: dict[Key, int]) -> AsyncIterator[tuple[Any, Any]]:
    """The fetch's records as Faust hands them on, noting in ``handed`` the last offset
    yielded per partition; but no changelog record after one whose hand-over was cut short
    (``cut``, noted while the record was being handed on). The flow can be resumed between
    that cut and the fetch's next record, and then the rest of the batch went on: recovery
    takes a changelog record only above the highest offset it has seen, and Faust's drain
    only from its read offset, so the cut record, fetched again, was ignored by both and the
    replica never had it. Held back, the rest is fetched again with it, in order."""
    async for tp, message in fetched:
        key = (tp.topic, tp.partition)
        if cut and key in cut and tp.topic in changelogs:
            continue
        handed[key] = message.offset
        yield tp, message


def install() -> None:
    """Wrap Faust's ``Consumer.getmany`` and keep its changelog queue through a flow resume
    (once per process)."""
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_kmq_refetch", False):
        return
    # Faust's own, kept aside (tests/unit/test_dependencies.py checks their shape).
    original_wait = Consumer._kmq_wait_next_records = Consumer._wait_next_records
    original_getmany = Consumer._kmq_getmany = Consumer.getmany

    async def _wait_next_records(self: Any, timeout: float) -> Any:
        records, active = await original_wait(self, timeout)
        self._kmq_fetched = records
        return records, active

    async def getmany(self: Any, timeout: float) -> Any:
        self._kmq_fetched = None
        self._kmq_cut = {}  # app.drain_fast_path notes hand-overs given up here
        handed: dict[Key, int] = {}
        changelogs = self.app.tables.changelog_topics
        async for tp, message in in_order(original_getmany(self, timeout), self._kmq_cut, changelogs, handed):
            yield tp, message
        fetched = {(tp.topic, tp.partition): [r.offset for r in recs]
                   for tp, recs in (self._kmq_fetched or {}).items() if tp.topic in changelogs}
        self._kmq_fetched = None
        lost = dropped(fetched, handed, self._kmq_cut)
        if lost and getattr(self, "_thread", None) is not None:
            for (topic, partition), first in (await self._thread.call_thread(_seek_back, self._thread, lost)).items():
                log.info("%s[%d]: records from offset %d were fetched and not handed to table recovery; "
                         "fetching them again (app.changelog_refetch)", topic, partition, first)

    Consumer._wait_next_records = _wait_next_records
    Consumer.getmany = getmany

    from faust.tables.manager import TableManager

    original_queue = TableManager._kmq_changelog_queue = TableManager.changelog_queue  # a property

    def changelog_queue(self: Any) -> Any:
        queue = original_queue.fget(self)
        if not getattr(queue, "_kmq_kept_on_resume", False):
            keep_on_resume(queue, self.app.flow_control)
        return queue

    TableManager.changelog_queue = property(changelog_queue)
    Consumer._kmq_refetch = True


def keep_on_resume(queue: Any, flow_control: Any) -> None:
    """Make ``flow_control``'s resume leave ``queue`` (Faust's changelog queue) as it is.
    The flow control empties its queues on resume and when told to; only the latter
    happens with the flow suspended (a rebalance, a stop), and that still empties it."""
    clear = queue.clear

    def clear_unless_resuming() -> None:
        if not flow_control.is_active():  # active: resume() is clearing, not a rebalance
            clear()

    queue.clear = clear_unless_resuming
    queue._kmq_kept_on_resume = True


async def _seek_back(thread: Any, lost: dict[Key, tuple[int, int]]) -> dict[Key, int]:
    """On the consumer's thread: seek each partition to its first dropped record if it is
    still assigned and where the fetch left it. Returns the partitions sought."""
    from aiokafka import TopicPartition

    consumer = thread._ensure_consumer()
    subscription = consumer._subscription.subscription
    assignment = None if subscription is None else subscription.assignment
    done = {}
    for (topic, partition), (first, after) in lost.items():
        tp = TopicPartition(topic, partition)
        state = None if assignment is None else assignment.state_value(tp)
        if state is None or not state.has_valid_position or state.position != after:
            continue  # revoked, or sought since: whoever moved it knows where to read
        consumer.seek(tp, first)
        done[(topic, partition)] = first
    return done

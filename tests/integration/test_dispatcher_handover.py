"""A shared queue's dispatcher hands its partitions over without writing after its successor
began (agents/dispatch/dispatcher.py, docs/shared-queues.md "Dispatcher handover").

An ACQUIRE that lands after a successor's BEGIN is fenced, and a delivery written for it
hands out records the successor hands out again: a message acked once comes back. The
chaos run on shared queues saw it in CI (two ids acked, then delivered again, no kill).
Here the dispatcher runs alone against the real broker, driven like the markers agent
drives it, so what it writes is read back exactly:

- after ``quiesce()`` (awaited in the revocation callback and at shutdown) it writes
  nothing more, whatever the tick timer or the consumers say;
- while the worker's membership lease has lapsed (app/membership.py) it neither begins
  nor acquires, and it does again once the lease holds.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import kmq
from agents.dispatch import lanes as lanes_module
from agents.dispatch.dispatcher import Dispatcher
from kmq.kafka.admin import ensure_topics
from kmq.protocol import deliveries as D
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from kmq.ops.queues_topic import QueueConfigs
from tests.topic_reads import records_to_end
from tests.conftest import wait_for


def _markers(settings, m: int) -> list:
    return [mk for r in records_to_end(settings, settings.markers_topic, [m]) for mk in marker_codec.decode(r.value())]


def _deliveries(settings, lane: int, consumer_id: str) -> list:
    key = D.header_key(consumer_id)
    layout = settings.lane_layout
    return [D.decode(r.value()) for r in records_to_end(settings, layout.topic(lane), [layout.partition(lane)])
            if r.key() == key]


def _delivered(settings, consumer_id: str, epoch: int | None = None) -> int:
    """How many messages the deliveries on lane 0 to ``consumer_id`` hand out (of ``epoch``)."""
    return sum(x.count for x in _deliveries(settings, 0, consumer_id)
               if isinstance(x, D.Delivery) and (epoch is None or x.epoch == epoch))


def _at_least(n: int, count) -> int:
    """Wait until ``count()`` reaches ``n`` (a credit's messages may come in several
    delivery records); return what it is then, to be checked for no more than ``n``."""
    return wait_for(lambda: (lambda got: got if got >= n else None)(count()), what=f"{n} delivered")


def _round(d: Dispatcher) -> None:
    # An event is handled at the start of a round and acted on within it; the second drain
    # comes after that round's writes, and its flush waits for them to be acknowledged.
    assert d.drain() and d.drain()


@contextmanager
def _dispatching(make_settings, queue: str, messages: int, membership=lambda: math.inf):
    """A dispatcher of its own topics, started, with ``messages`` sent to ``queue``:
    (settings, the queue's markers partition, the dispatcher); stopped afterwards."""
    settings = make_settings(dispatch="shared")
    d = Dispatcher(settings, configs=lambda: QueueConfigs(settings, follow=True), membership=membership)
    d.start()
    client = kmq.Client(settings=settings)
    try:
        for i in range(messages):
            client.send(queue, f"m{i}".encode())
        client.flush()
        yield settings, markers_partition(queue, settings.markers_partitions), d
    finally:
        d.stop()
        client.close()


def test_after_quiesce_nothing_more_is_written_and_a_lapsed_lease_begins_and_acquires_nothing(
        make_settings, queue):
    lease = [math.inf]
    with _dispatching(make_settings, queue, 20, membership=lambda: lease[0]) as (settings, m, d):
        # A lapsed lease: no BEGIN.
        lease[0] = 0.0
        d.owned({m})
        _round(d)
        assert not [mk for mk in _markers(settings, m) if isinstance(mk, M.Begin)]

        # The lease holds: BEGIN, and once the agent says it applied it, ACQUIRE + delivery.
        lease[0] = math.inf
        d.owned({m})
        begins = wait_for(lambda: [mk for mk in _markers(settings, m) if isinstance(mk, M.Begin)])
        epoch = begins[-1].epoch
        d.on_begin(m, epoch, {})
        d.on_credit(m, M.Credit(queue, "c1", 0, 0, 0, 5, 60_000, 30_000))
        assert _at_least(5, lambda: _delivered(settings, "c1")) == 5
        _round(d)
        assert _delivered(settings, "c1") == 5  # and no more: the credit was for 5

        # The lease lapses again: the consumer asks for more, nothing is acquired.
        lease[0] = 0.0
        written = len(_markers(settings, m))
        d.on_credit(m, M.Credit(queue, "c1", 0, epoch, 1, 5, 60_000, 30_000))
        _round(d)
        assert len(_markers(settings, m)) == written
        lease[0] = math.inf
        wait_for(lambda: sum(x.count for x in _deliveries(settings, 0, "c1") if isinstance(x, D.Delivery)) == 10)

        # A rebalance: quiesced, then neither the stale tick view nor credits write anything.
        assert d.quiesce()
        written = len(_markers(settings, m))
        d.owned({m})
        d.on_credit(m, M.Credit(queue, "c1", 0, epoch, 2, 5, 60_000, 30_000))
        _round(d)
        assert len(_markers(settings, m)) == written
        assert sum(x.count for x in _deliveries(settings, 0, "c1") if isinstance(x, D.Delivery)) == 10

        # Assigned anew: it begins a new epoch (and hands out only after that BEGIN is applied).
        d.resume()
        d.owned({m})
        wait_for(lambda: len([mk for mk in _markers(settings, m) if isinstance(mk, M.Begin)]) == 2)
        assert d.stats["lanes-withheld"] == 0


def test_a_producer_failed_for_good_is_replaced_and_its_partitions_begin_anew(make_settings, queue):
    """librdkafka's gapless guarantee makes a failed ACQUIRE fatal for the producer (no later
    write can land past it, agents/dispatch/lanes.py). The fatal error itself needs a broker
    outage longer than the delivery timeout; here the writer is marked failed as its error
    callback would, and the dispatcher must begin anew on a new producer and go on."""
    with _dispatching(make_settings, queue, 10) as (settings, m, d):
        d.owned({m})
        first = wait_for(lambda: [mk for mk in _markers(settings, m) if isinstance(mk, M.Begin)])[-1].epoch
        d.on_begin(m, first, {})
        d.on_credit(m, M.Credit(queue, "c1", 0, 0, 0, 5, 60_000, 30_000))
        wait_for(lambda: sum(x.count for x in _deliveries(settings, 0, "c1") if isinstance(x, D.Delivery)) == 5)

        d._lanes.fatal = True  # what LaneWriter._note records for a fatal delivery error
        _round(d)
        assert d.stats["writers-replaced"] == 1
        d.owned({m})  # the tick timer, next tick: the partition is no longer begun
        begins = wait_for(lambda: [mk.epoch for mk in _markers(settings, m) if isinstance(mk, M.Begin)][1:])
        assert begins[0] != first
        cursors = {(queue, p): 0 for p in range(settings.queue_partitions)}
        cursors.update({(a.range.queue, a.range.partition): a.range.end
                        for a in _markers(settings, m) if isinstance(a, M.Acquire)})  # the table's view
        d.on_begin(m, begins[0], cursors)
        d.on_credit(m, M.Credit(queue, "c1", 0, begins[0], 0, 5, 60_000, 30_000))
        # the other five, on the new producer
        assert _at_least(5, lambda: _delivered(settings, "c1", begins[0])) == 5
        _round(d)
        assert _delivered(settings, "c1", begins[0]) == 5

        def handed(epoch):
            return {(x.range.partition, o) for x in _deliveries(settings, 0, "c1")
                    if isinstance(x, D.Delivery) and x.epoch == epoch
                    for o in M.mask_offsets(x.range.start, x.mask)}
        assert not handed(first) & handed(begins[0]) and len(handed(first) | handed(begins[0])) == 10


def _one_message_and_begun(d: Dispatcher, client, settings, queue: str) -> int:
    """Send one message to ``queue``; once ``d`` has begun its markers partition (BEGIN in
    the log), tell it so, as the markers agent would. Returns the markers partition."""
    client.send(queue, b"m0")
    client.flush()
    m = markers_partition(queue, settings.markers_partitions)
    d.owned({m})  # the tick timer says so every tick; the first may come before set-up
    begins = wait_for(lambda: d.owned({m}) or [mk for mk in _markers(settings, m) if isinstance(mk, M.Begin)])
    d.on_begin(m, begins[-1].epoch, {})
    return m


def test_a_dispatcher_whose_start_up_fails_tries_again_and_then_dispatches(make_settings, queue):
    """A broker that does not answer at first (here: the settings view failing twice) must
    not leave the worker's shared queues without a dispatcher for good."""
    settings = make_settings(dispatch="shared")
    attempts = []

    def configs() -> QueueConfigs:
        attempts.append(1)
        if len(attempts) <= 2:
            raise kmq.BrokerUnavailableError("no broker answered (test)")
        return QueueConfigs(settings, follow=True)

    d = Dispatcher(settings, configs=configs)
    d.start()
    client = kmq.Client(settings=settings)
    try:
        m = _one_message_and_begun(d, client, settings, queue)
        assert len(attempts) == 3
        d.on_credit(m, M.Credit(queue, "c1", 0, 0, 0, 5, 60_000, 30_000))
        got = wait_for(lambda: [x for x in _deliveries(settings, 0, "c1") if isinstance(x, D.Delivery)])
        assert sum(x.count for x in got) == 1
    finally:
        d.stop()
        client.close()


def test_a_credit_is_checked_against_the_lanes_the_topic_has_not_the_setting(make_settings, queue):
    """A deployment whose deliveries topic was made with fewer lanes than the setting says
    (the default grew from 32 to 256): a lane past the topic's end is refused, not written to."""
    made = make_settings(dispatch="shared", deliveries_partitions=4)
    settings = made.replace(deliveries_partitions=256)
    d = Dispatcher(settings, configs=lambda: QueueConfigs(settings, follow=True))
    d.start()
    client = kmq.Client(settings=settings)
    try:
        m = _one_message_and_begun(d, client, settings, queue)
        d.on_credit(m, M.Credit(queue, "c-far", 100, 0, 0, 5, 60_000, 30_000))
        d.on_credit(m, M.Credit(queue, "c-near", 3, 0, 0, 5, 60_000, 30_000))
        got = wait_for(lambda: [x for x in _deliveries(settings, 3, "c-near") if isinstance(x, D.Delivery)])
        assert sum(x.count for x in got) == 1
        assert d.stats["bad-credits"] == 1
    finally:
        d.stop()
        client.close()


def test_lanes_past_the_first_topic_and_topics_added_later_are_written_to(make_settings, queue, monkeypatch):
    """Lanes live in several deliveries topics (kmq.protocol.lane_layout): lane 20 of two
    16-partition topics is partition 4 of the second. A topic added after the dispatcher read
    them is found when a consumer asks on one of its lanes, not refused as a bad lane."""
    monkeypatch.setattr(lanes_module, "LANES_REREAD_S", 0.0)
    settings = make_settings(dispatch="shared", deliveries_partitions=32, deliveries_topic_partitions=16)
    assert settings.lane_layout.names() == [settings.deliveries_topic, f"{settings.deliveries_topic}.1"]
    d = Dispatcher(settings, configs=lambda: QueueConfigs(settings, follow=True))
    d.start()
    client = kmq.Client(settings=settings)
    try:
        m = _one_message_and_begun(d, client, settings, queue)
        d.on_credit(m, M.Credit(queue, "c-second", 20, 0, 0, 1, 60_000, 30_000))
        got = wait_for(lambda: [x for x in _deliveries(settings, 20, "c-second") if isinstance(x, D.Delivery)])
        assert sum(x.count for x in got) == 1

        grown = settings.replace(deliveries_partitions=48)
        ensure_topics(grown)  # the third topic, f"{...}.2"
        client.send(queue, b"m1")
        client.flush()
        d.on_credit(m, M.Credit(queue, "c-third", 40, 0, 0, 1, 60_000, 30_000))
        got = wait_for(lambda: [x for x in _deliveries(grown, 40, "c-third") if isinstance(x, D.Delivery)])
        assert sum(x.count for x in got) == 1
        assert grown.lane_layout.topic(40) == f"{settings.deliveries_topic}.2"
        assert d.stats["bad-credits"] == 0
    finally:
        d.stop()
        client.close()

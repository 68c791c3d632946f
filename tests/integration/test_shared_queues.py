"""Shared queues: any number of consumers of one queue, dispatched by the tracker.

What partition mode cannot do: more consumers than partitions all get work, none holds
more than it asked for, a consumer that dies gives its messages back after its
visibility timeout without pausing the others, the mode changes under load without
losing or duplicating anything, and a tracker killed mid-run loses nothing acquired.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import kmq
from kmq.dev.devstack import TrackerProcess, settings_env
from tests.conftest import partition_mode, wait_for
from tests.integration.helpers.acking_worker import AckingWorker
from tests.integration.views import queue_detail

HELPER = Path(__file__).parent / "helpers" / "consume_then_hang.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(shared_settings, tracker):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def shared(client, queue, **settings) -> str:
    client.configure_queue(queue, dispatch="shared", **settings)
    return queue


def test_more_consumers_than_partitions_all_get_work_none_more_than_it_asked(client, queue, tracker):
    shared(client, queue)
    stop = threading.Event()
    workers = [AckingWorker(client, queue, max_in_flight=5, stop=stop) for _ in range(6)]
    assert all(w.consumer.mode == "shared" for w in workers)
    for w in workers:
        w.start()
    try:
        # All six are the dispatcher's before anything is sent: the 300 go in under a second,
        # and a consumer it heard of late would get none of them.
        wait_for(lambda: (queue_detail(tracker, queue) or {}).get("consumers") == 6, 60,
                 what="six consumers in the queue's view")
        ids = client.send_batch(queue, [b"m%d" % i for i in range(300)])
        client.flush()
        wait_for(lambda: sum(len(w.got) for w in workers) >= 300, 60, what="300 acked")
    finally:
        stop.set()
        for w in workers:
            w.join(15)
    assert [w.error for w in workers] == [None] * 6
    got = Counter(i for w in workers for i in w.got)
    assert set(got) == set(ids) and max(got.values()) == 1, "lost or duplicated"
    assert all(w.got for w in workers), f"an idle consumer: {[len(w.got) for w in workers]}"
    assert max(w.most_held for w in workers) <= 5, "a consumer held more than it asked for"


def test_the_queue_view_counts_live_consumers(client, queue, tracker):
    shared(client, queue)

    def consumers() -> int | None:
        return (queue_detail(tracker, queue) or {}).get("consumers", -1)

    opened = [client.consumer(queue) for _ in range(3)]
    try:
        wait_for(lambda: consumers() == 3, 60, what="three consumers in the queue's view")
        opened.pop().close()  # a consumer that leaves says so: gone at once, not after its lease
        wait_for(lambda: consumers() == 2, 30, what="two consumers after one closed")
    finally:
        for c in opened:
            c.close()
    wait_for(lambda: consumers() == 0, 30, what="no consumers")
    partition_mode(client, queue)  # a Kafka group's members: not the tracker's to count
    wait_for(lambda: consumers() is None, 30, what="no count in partition mode")


def test_a_dead_consumers_messages_come_back_to_the_others(client, queue, shared_settings):
    shared(client, queue)
    ids = client.send_batch(queue, [b"m%d" % i for i in range(60)])
    client.flush()
    env = {**os.environ, **settings_env(shared_settings), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(HELPER), queue, "30", "3"], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        received = json.loads(child.stdout.readline())["received"]
        acked = json.loads(child.stdout.readline())["acked"]
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.kill()  # SIGKILL, holding 20 of its 30 (visibility timeout 6 s)
        child.wait()
    assert len(received) == 30 and len(acked) == 10
    with client.consumer(queue, visibility_timeout_s=30) as c:
        seen: list[str] = []

        def step():
            for m in c.receive_batch(100, 0.2):
                seen.append(m.id)
                m.ack()
            return set(seen) >= set(ids) - set(acked)
        wait_for(step, 60, what="every unacked message")
        c.flush()
    assert set(seen) | set(acked) == set(ids), "a message was lost"
    assert not set(seen) & set(acked), "an acked message came back"
    assert len(seen) == len(set(seen)), "delivered twice to the live consumer"


def test_the_mode_changes_under_load_without_losing_or_duplicating(client, queue):
    """partition -> shared -> partition while messages flow: each id reaches user code once."""
    stop = threading.Event()
    workers = [AckingWorker(client, queue, max_in_flight=20, stop=stop) for _ in range(2)]
    for w in workers:
        w.start()
    sent: list[str] = []

    def send(n):
        sent.extend(client.send_batch(queue, [b"x"] * n))
        client.flush()

    try:
        send(100)
        wait_for(lambda: sum(len(w.got) for w in workers) >= 50, 60, what="partition mode at work")
        client.configure_queue(queue, dispatch="shared")
        send(100)
        wait_for(lambda: all(w.consumer.mode == "shared" for w in workers), 30, what="consumers in shared mode")
        wait_for(lambda: sum(len(w.got) for w in workers) >= 200, 60, what="shared mode at work")
        send(100)
        client.configure_queue(queue, dispatch="partition")
        wait_for(lambda: client.queue_config(queue).handover_pending is False, 30, what="the handover")
        send(100)
        wait_for(lambda: all(w.consumer.mode == "partition" for w in workers), 30, what="back to partition")
        wait_for(lambda: sum(len(w.got) for w in workers) >= 400, 90, what="everything acked")
    finally:
        stop.set()
        for w in workers:
            w.join(15)
    got = Counter(i for w in workers for i in w.got)
    assert set(got) == set(sent), f"lost: {len(set(sent) - set(got))}"
    assert max(got.values()) == 1, "a message reached user code twice"


def test_a_tracker_killed_mid_run_loses_nothing_it_handed_out(make_client, make_settings, artifacts, queue):
    settings = make_settings(visibility_timeout_s=3.0, max_deliveries=10)
    first = TrackerProcess(settings, artifacts / "tracker-shared-kill-1.log").start(timeout_s=120)
    client = make_client(settings)
    stop = threading.Event()
    try:
        shared(client, queue)
        ids = client.send_batch(queue, [b"m%d" % i for i in range(400)])
        client.flush()
        workers = [AckingWorker(client, queue, max_in_flight=10, stop=stop) for _ in range(3)]
        for w in workers:
            w.start()
        wait_for(lambda: sum(len(w.got) for w in workers) >= 100, 60, what="work under way")
        first.kill()  # SIGKILL: its dispatcher dies mid-dispatch
    finally:
        first.stop()
    second = TrackerProcess(settings, artifacts / "tracker-shared-kill-2.log").start(timeout_s=120)
    try:
        wait_for(lambda: set(i for w in workers for i in w.got) >= set(ids), 90, what="everything acked")
    finally:
        stop.set()
        for w in workers:
            w.join(15)
        second.stop()
    assert [w.error for w in workers] == [None] * 3
    got = Counter(i for w in workers for i in w.got)
    assert set(got) == set(ids), "a message was lost"


def test_a_reference_reader_stops_fetching_once_its_consumer_idles(make_client, make_settings, artifacts, queue):
    # A deployment of its own: the queue alone on its partition, so its ranges go by reference.
    settings = make_settings()
    t = TrackerProcess(settings, artifacts / "tracker-shared-ref-idle.log").start(timeout_s=120)
    try:
        client = make_client(settings)
        shared(client, queue)
        client.send_batch(queue, [b"x" * 100] * 5000)
        client.flush()
        with client.consumer(queue, max_in_flight=5000, batch_size=5000) as c:
            got = []

            def drain() -> bool:
                batch = c.receive_batch(5000, 0.2)
                batch.ack()
                got.extend(m.id for m in batch)
                return len(got) >= 5000
            wait_for(drain, 60, what="5,000 messages")
            refs = c._source.refs.kc  # the reader of referred ranges: made by the first one
            assert refs is not None, "no range came by reference"
            # Left assigned at the partition's end it would fetch every fetch wait, for nothing.
            wait_for(lambda: not c.receive_batch(10, 0.1) and not refs.assignment(), 15,
                     what="the idle reference reader unassigned")
        assert len(set(got)) == 5000
    finally:
        t.stop()


@pytest.mark.parametrize("mode", ["shared", "partition"])
def test_a_receive_that_times_out_polls_a_few_times_not_hundreds(client, queue, mode):
    """librdkafka waits in whole milliseconds and a poll may end a little early: a receive
    left with less than a millisecond polled with 0 ms, at once, until its deadline. Before
    the fix: about 180 empty polls ending every timed-out receive(0.1), 9 of an idle
    consumer's 14 ms of CPU a second."""
    if mode == "shared":
        shared(client, queue)
    else:
        partition_mode(client, queue)
    with client.consumer(queue) as c:
        assert c.mode == mode
        fetches = []
        fetch = c._source.fetch

        def counted(room: int, timeout_s: float) -> int:
            fetches.append(timeout_s)
            return fetch(room, timeout_s)

        c._source.fetch = counted
        for _ in range(10):
            assert c.receive(0.1) is None
    assert len(fetches) <= 40, f"{len(fetches)} fetches in 10 receives; the shortest waits: {sorted(fetches)[:5]}"


def test_a_dead_consumers_messages_come_back_once_under_a_short_visibility_timeout(client, queue):
    """Its lease (5 s) outlives its messages' visibility (4 s): their copies must not go
    back to it. Before (kmq.protocol.liveness), the dispatcher handed 10 of the 20 lapsed
    messages to the dead consumer, a member till its lease ran out: they came back after
    a second timeout, as delivery 3 (so at 2 and 3 s too)."""
    shared(client, queue)
    dead = client.consumer(queue, visibility_timeout_s=4, max_in_flight=50, max_processing_s=60)
    ids = client.send_batch(queue, [b"m%d" % i for i in range(20)])
    client.flush()
    held: list[str] = []
    wait_for(lambda: held.extend(m.id for m in dead.receive_batch(20 - len(held), 0.2)) or len(held) == 20,
             60, what="the consumer that dies holds all 20")
    # It dies having asked for more (a heartbeat CREDIT with room), as a busy worker would.
    holding_since = time.monotonic()
    wait_for(lambda: dead._source._last_credit_s > holding_since and dead._source._last_free > 0, 30,
             what="a CREDIT with room, sent while holding the 20")
    dead._writer.flush(10)
    dead._vanish()  # as a SIGKILL: no farewell, no keepalive
    counts: dict[str, list[int]] = {}
    with client.consumer(queue, visibility_timeout_s=30) as live:
        def step() -> bool:
            for m in live.receive_batch(20, 0.2):
                counts.setdefault(m.id, []).append(m.delivery_count)
                m.ack()
            return len(counts) == 20
        wait_for(step, 60, what="all 20 at the live consumer")
        live.flush()
    assert set(counts) == set(ids)
    assert sorted(counts.values()) == [[2]] * 20, f"delivery counts: {counts}"

"""Claims of docs/shared-queues.md, docs/scaling.md and the README's shared-queue parts that
the other shared tests leave out, checked as a user reads them: edge values of
``max_in_flight`` (1, beyond MAX_CREDIT, full while another consumer takes the rest), a
shared queue spread over four partitions or grown to them under its consumers, a queue name
at its length limit, a transactional consumer, messages held across a mode switch, the
mode switched back and forth twice while messages flow, and a killed consumer's lease."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

import kmq
from kmq.dev.devstack import settings_env
from kmq.protocol.limits import MAX_CREDIT
from kmq.protocol.placement import queue_partitions
from tests.conftest import wait_for
from tests.integration.helpers.acking_worker import AckingWorker
from tests.integration.views import all_acked, queue_detail, tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")

HELPER = Path(__file__).parent / "helpers" / "consume_then_hang.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(shared_settings):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def drain(consumer, ids, timeout_s=60.0):
    """Receive and ack until every id of ``ids`` came; return the ids received (in order)."""
    got: list[str] = []

    def step():
        for m in consumer.receive_batch(100, 0.2):
            got.append(m.id)
            m.ack()
        return set(got) >= set(ids)
    wait_for(step, timeout_s, what=f"{len(ids)} messages")
    return got


def test_max_in_flight_one_gets_every_message_holding_one_at_a_time(client, queue):
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"m%d" % i for i in range(30)])
    client.flush()
    with client.consumer(queue, max_in_flight=1, visibility_timeout_s=30) as c:
        assert c.mode == "shared"
        held: list[int] = []
        got: list[str] = []

        def step():
            m = c.receive(0.2)
            held.append(c.in_flight)
            if m is not None:
                got.append(m.id)
                m.ack()
            return len(got) >= len(ids)
        wait_for(step, 90, what="30 messages one at a time")
        assert c.receive(1.0) is None
    assert Counter(got) == Counter(ids), "lost or duplicated"
    assert max(held) <= 1, f"held {max(held)} with max_in_flight=1"


def test_a_very_large_max_in_flight_asks_within_the_codec_limit_and_gets_everything(client, queue):
    """max_in_flight beyond MAX_CREDIT (1,048,576): the CREDIT is clamped, nothing refused."""
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"m%d" % i for i in range(200)])
    client.flush()
    # A read-ahead this large makes the first CREDIT ask for all of it: clamped, or set aside.
    with client.consumer(queue, max_in_flight=10**9, prefetch=4 * MAX_CREDIT, visibility_timeout_s=30) as c:
        got = drain(c, ids)
    assert Counter(got) == Counter(ids)


def test_a_shared_queue_spread_over_four_partitions_reaches_every_consumer_once(client, queue, tracker):
    client.configure_queue(queue, dispatch="shared", spread=4)
    tracker_sees(tracker, queue, spread=4)
    stop = threading.Event()
    workers = [AckingWorker(client, queue, 5, stop) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        wait_for(lambda: (queue_detail(tracker, queue) or {}).get("consumers") == 3, 60,
                 what="three consumers in the queue's view")
        ids = client.send_batch(queue, [b"s%d" % i for i in range(200)])
        client.flush()
        wait_for(lambda: sum(len(w.got) for w in workers) >= 200, 90, what="200 acked")
    finally:
        stop.set()
        for w in workers:
            w.join(15)
    assert [w.error for w in workers if w.error is not None] == []
    got = [w.got for w in workers]
    most = [w.most_held for w in workers]
    partitions = set().union(*(w.partitions for w in workers))
    counts = Counter(i for g in got for i in g)
    assert set(counts) == set(ids) and max(counts.values()) == 1, "lost or duplicated"
    assert max(most) <= 5
    # A batch goes to the spread's partitions in turn: all four, from the home one on.
    assert partitions == set(queue_partitions(queue, 4, 4)), partitions


def test_a_queue_named_at_the_length_limit_is_dispatched(client):
    queue = f"Q.{uuid.uuid4().hex}_~-".ljust(128, "x")  # 128 characters, every kind allowed
    assert len(queue) == 128
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"a", b"b", b"c"])
    client.flush()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        assert c.mode == "shared"
        got = drain(c, ids)
    assert Counter(got) == Counter(ids)


def test_first_message_of_a_new_shared_consumer(client, queue):
    """Measured, not asserted: from consumer() to the first message (docs: 0.05-0.2 s)."""
    client.configure_queue(queue, dispatch="shared")
    client.send(queue, b"one")
    client.flush()
    c = client.consumer(queue, visibility_timeout_s=30)
    t0 = time.monotonic()
    try:
        m = wait_for(lambda: c.receive(0.05), 30, what="the first message")
        print(f"first message after {time.monotonic() - t0:.3f} s")
        m.ack()
    finally:
        c.close()


def test_the_mode_switched_back_and_forth_twice_loses_and_duplicates_nothing(client, queue):
    """partition -> shared -> partition -> shared while messages flow (the queue starts in
    partition mode: KMQ_DISPATCH is shared, so a first switch to shared would change nothing)."""
    client.configure_queue(queue, dispatch="partition")
    stop = threading.Event()
    workers = [AckingWorker(client, queue, 20, stop) for _ in range(2)]
    assert all(w.consumer.mode == "partition" for w in workers)
    for w in workers:
        w.start()
    sent: list[str] = []

    def send(n):
        sent.extend(client.send_batch(queue, [b"x"] * n))
        client.flush()

    def received() -> int:
        return sum(len(w.got) for w in workers)

    try:
        for round_ in range(2):
            send(100)
            wait_for(lambda: received() >= len(sent) - 50, 90, what=f"partition mode at work ({round_})")
            client.configure_queue(queue, dispatch="shared")
            send(100)
            wait_for(lambda: all(w.consumer.mode == "shared" for w in workers), 30, what="shared mode")
            wait_for(lambda: received() >= len(sent) - 50, 90, what=f"shared mode at work ({round_})")
            send(100)
            if round_ == 0:
                client.configure_queue(queue, dispatch="partition")
                wait_for(lambda: client.queue_config(queue).handover_pending is False, 30, what="the handover")
                send(100)
                wait_for(lambda: all(w.consumer.mode == "partition" for w in workers), 30,
                         what="back to partition")
        wait_for(lambda: received() >= len(sent), 120, what="everything acked")
    finally:
        stop.set()
        for w in workers:
            w.join(15)
    assert [w.error for w in workers] == [None, None]
    got = Counter(i for w in workers for i in w.got)
    assert set(got) == set(sent), f"lost: {len(set(sent) - set(got))}"
    assert max(got.values()) == 1, f"reached user code twice: {sum(1 for n in got.values() if n > 1)}"


def test_a_consumer_at_its_max_in_flight_gets_no_more_and_the_rest_go_to_another(client, queue):
    """Credits are the free max_in_flight: one holding all it may leaves the others' work alone."""
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"m%d" % i for i in range(10)])
    client.flush()
    with client.consumer(queue, max_in_flight=3, visibility_timeout_s=60) as a:
        held = []
        wait_for(lambda: held.extend(a.receive_batch(3 - len(held), 0.2)) or len(held) >= 3, 30,
                 what="three held")
        assert a.receive(1.0) is None and a.in_flight == 3
        with client.consumer(queue, visibility_timeout_s=60) as b:
            rest = drain(b, set(ids) - {m.id for m in held}, timeout_s=30)
        for m in held:
            m.ack()
        assert a.receive(1.0) is None
    assert sorted([m.id for m in held] + rest) == sorted(ids), "lost or duplicated"


def test_a_transactional_consumer_of_a_shared_queue_receives_and_acks(client, queue):
    """transactional=True is not needed in shared mode (the table of docs/shared-queues.md),
    but a consumer that sets it still works there."""
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"t%d" % i for i in range(20)])
    client.flush()
    with client.consumer(queue, transactional=True, visibility_timeout_s=4) as c:
        assert c.mode == "shared"
        got = drain(c, ids)
        c.flush()
        assert c.receive(6.0) is None, "an acked message came back"
    assert Counter(got) == Counter(ids)


@pytest.mark.parametrize("room", [True, False], ids=["with-room", "at-max-in-flight"])
@pytest.mark.parametrize("to", ["partition", "shared"])
def test_a_message_held_across_a_mode_switch_is_settled_as_before(client, queue, tracker, to, room):
    """What user code holds when the mode changes stays held and its ack counts. A consumer
    switches on its receiving thread when it has room to receive; one at its max_in_flight
    switches once user code settled something."""
    client.configure_queue(queue, dispatch="shared" if to == "partition" else "partition")
    if to == "shared":
        wait_for(lambda: client.queue_config(queue).handover_pending is False, 30, what="the handover")
    ids = [client.send(queue, b"h0")]
    client.flush()
    with client.consumer(queue, max_in_flight=10 if room else 1, visibility_timeout_s=60) as c:
        held = wait_for(lambda: c.receive(0.2), 60, what="the first message")
        switched_at = time.monotonic()
        client.configure_queue(queue, dispatch=to)
        if room:
            wait_for(lambda: c.receive(0.05) is None and c.mode == to, 30, what=f"the consumer in {to} mode")
            print(f"consumer in {to} mode {time.monotonic() - switched_at:.2f} s after the change")
        else:
            wait_for(lambda: client.queue_config(queue).dispatch == to, 30, what="the setting")
            assert c.receive(1.0) is None  # nothing more while it holds max_in_flight
        held.ack()
        ids += client.send_batch(queue, [b"h%d" % i for i in range(1, 5)])
        client.flush()
        rest = drain(c, set(ids) - {held.id}, timeout_s=60)
        assert c.mode == to
        c.flush()
        # Every ack applied, nothing left in flight (a lost ack would leave the held one there).
        wait_for(lambda: all_acked(tracker, queue, len(ids)), 30, what="all five acked, none in flight")
    assert sorted(rest + [held.id]) == sorted(ids)


def test_a_spread_grown_while_shared_consumers_run_reaches_them_all(client, queue, tracker):
    """spread only grows, at run time: the dispatcher reads the added partitions too, and
    what was enqueued before stays reachable."""
    client.configure_queue(queue, dispatch="shared")
    before = client.send_batch(queue, [b"b%d" % i for i in range(40)])
    client.flush()
    with client.consumer(queue, max_in_flight=20, visibility_timeout_s=60) as c:
        got = drain(c, before[:1])
        client.configure_queue(queue, spread=4)
        tracker_sees(tracker, queue, spread=4)
        wait_for(lambda: client.queue_config(queue).spread == 4, 30, what="the client seeing spread 4")
        after = client.send_batch(queue, [b"a%d" % i for i in range(200)])
        client.flush()
        got += drain(c, set(before + after) - set(got), timeout_s=90)
        c.flush()
    counts = Counter(got)
    assert set(counts) == set(before + after) and max(counts.values()) == 1, "lost or duplicated"
    wait_for(lambda: all_acked(tracker, queue, 240), 30, what="240 acked, none in flight")


def test_a_killed_consumer_leaves_the_count_after_its_lease_and_received_counts_deliveries(
        client, queue, tracker, shared_settings):
    """The view's ``consumers``: a consumer that died is gone once its 5 s lease ran out; the
    live one keeps getting work meanwhile. ``received`` counts every delivery (ACQUIREs)."""
    client.configure_queue(queue, dispatch="shared")
    ids = client.send_batch(queue, [b"k%d" % i for i in range(10)])
    client.flush()
    env = {**os.environ, **settings_env(shared_settings), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(HELPER), queue, "10", "1"], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert sorted(json.loads(child.stdout.readline())["received"]) == sorted(ids)
        assert sorted(json.loads(child.stdout.readline())["acked"]) == sorted(ids)  # durably
        assert child.stdout.readline().strip() == "ready"
        with client.consumer(queue, visibility_timeout_s=60) as live:
            wait_for(lambda: (queue_detail(tracker, queue) or {}).get("consumers") == 2, 30,
                     what="two consumers")
            child.kill()
            child.wait()
            killed_at = time.monotonic()
            more = client.send_batch(queue, [b"n%d" % i for i in range(5)])
            client.flush()
            got = drain(live, more, timeout_s=60)
            wait_for(lambda: (queue_detail(tracker, queue) or {}).get("consumers") == 1, 30,
                     what="the dead consumer gone")
            print(f"dead consumer gone after {time.monotonic() - killed_at:.2f} s")
            live.flush()
    finally:
        child.kill()
        child.wait()
    assert sorted(got) == sorted(more)
    d = wait_for(lambda: all_acked(tracker, queue, 15), 30, what="15 acked")
    counts = d["since_start"]
    # What the dead consumer was handed in its last lease came back once (redelivered).
    assert counts["received"] == 15 + counts["redelivered"], counts



"""A shared consumer whose user code is busy asked for work ahead: what the dispatcher sent
it meanwhile must wait invisible, not time out on its lane and come back with its delivery
count spent (SharedSource.read_in_background; docs/shared-queues.md, step 4)."""

from __future__ import annotations

import threading
import time

import kmq
from tests.conftest import wait_for

import pytest

VISIBILITY_S = 1.0


@pytest.fixture
def client(shared_settings, tracker):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def receive(c, n: int, what: str) -> list:
    got: list = []
    wait_for(lambda: got.extend(c.receive_batch(n - len(got), timeout_s=0.2)) or len(got) >= n, 60, what=what)
    return got


def test_what_reaches_a_busy_consumer_waits_for_it_with_its_delivery_count(client, queue, tracker):
    client.configure_queue(queue, dispatch="shared", max_deliveries=10)
    # max_processing_s: user code may hold b"busy" (the suite's default 0 lets it time out).
    with client.consumer(queue, visibility_timeout_s=VISIBILITY_S, max_processing_s=60, max_in_flight=4,
                         prefetch=4) as c:
        client.send(queue, b"busy")
        client.send(queue, b"retry")
        client.flush()
        first = {m.value: m for m in receive(c, 2, "the first two")}
        first[b"retry"].release(0)  # comes again as delivery 2, while b"busy" is worked on
        c.flush()
        client.send(queue, b"new")
        client.flush()
        # User code busy with b"busy" for three visibility timeouts: it receives nothing.
        began = time.monotonic()
        wait_for(lambda: time.monotonic() - began >= 3 * VISIBILITY_S and c.stats["received"] >= 4, 60,
                 what="three visibility timeouts, and what was sent meanwhile read ahead")
        got = receive(c, 2, "what was sent meanwhile")
        assert sorted((m.value, m.delivery_count) for m in got) == [(b"new", 1), (b"retry", 2)]
        for m in got + [first[b"busy"]]:
            m.ack()
        c.flush()
        assert c.receive_batch(10, timeout_s=2 * VISIBILITY_S) == [], "a copy came back"


def test_a_hung_consumers_messages_wait_for_another_consumer(client, queue, tracker):
    # docs/shared-queues.md, "User code away": a consumer whose user code holds a message past
    # its last extension and asks for nothing since asks the dispatcher for nothing, and gives
    # its read-ahead back at once, uncounted. Before, it asked all the same (its message
    # lapsed and freed room), was handed its message's copy, and kept that and its
    # read-ahead invisible, unhandled, for as long as it lived.
    client.configure_queue(queue, dispatch="shared", max_deliveries=3)
    with client.consumer(queue, visibility_timeout_s=4, max_processing_s=4, prefetch=3) as hung:
        sent = [client.send(queue, b"m%d" % i) for i in range(3)]
        client.flush()
        m = wait_for(lambda: hung.receive(0.2), 30, what="the first message")
        assert m.id == sent[0]  # ... and its user code never returns
        wait_for(lambda: hung.in_flight == 3, 30, what="the rest read ahead")
        # Its consumer counts the message lapsed after the tracker took it back: the copy
        # was republished, and went to the hung consumer if it asked.
        wait_for(lambda: hung.stats.get("lapsed", 0) >= 1, 30, what="the message lapsed")
        assert hung.stats["user-code-away"] == 1
        with client.consumer(queue, visibility_timeout_s=30) as other:
            got = []
            while len(got) < 3:
                again = wait_for(lambda: other.receive(0.2), 30, what=f"the messages at the other consumer, {got}")
                got.append((again.id, again.delivery_count))
                again.ack()
            # The held message counted (it reached user code); the read-ahead given back at once,
            # uncounted (it came back counted after the visibility timeout before: an audit's
            # max_deliveries 1 dead-lettered an ordered run that never reached user code).
            assert sorted(got) == sorted([(sent[0], 2)] + [(i, 1) for i in sent[1:]])
            # Both read ahead, and maybe the held message's copy too, if a delivery sent against
            # a CREDIT from before it was found away brought it (given back at the next round).
            assert hung.stats["returned-away"] >= 2


def test_a_thread_waiting_in_receive_keeps_its_consumer_asking_while_another_hangs(client, queue, tracker):
    # docs/shared-queues.md, "User code away": one busy thread of several is not away. An
    # audit: a thread waiting in receive(30) was not counted, so while the other thread held
    # its message past its give-up the consumer asked for nothing, and a message sent then
    # reached the waiting thread only when the held one lapsed.
    client.configure_queue(queue, dispatch="shared")
    with client.consumer(queue, visibility_timeout_s=8, max_processing_s=8) as c:
        client.send(queue, b"held")
        client.flush()
        held = wait_for(lambda: c.receive(0.2), 30, what="the held message")
        held_at = time.monotonic()  # ... and this thread never comes back to it
        got: list = []
        waiting = threading.Thread(target=lambda: got.append((c.receive(timeout_s=30), dict(c.stats))))
        waiting.start()
        # Past the held message's give-up (one keepalive round, 2 s) while the thread waits:
        # that span is the behaviour under test.
        wait_for(lambda: time.monotonic() - held_at > 4, 10, what="the give-up passed")
        client.send(queue, b"new")
        client.flush()
        waiting.join(30)
        m, stats = got[0]
        assert m is not None and m.value == b"new"
        assert stats.get("lapsed", 0) == 0 and stats.get("user-code-away", 0) == 0, stats
        m.ack()
        held.ack()


def test_a_hung_consumer_whose_message_lapsed_asks_for_nothing_until_it_is_back(client, queue, tracker):
    # Nothing read ahead: once its one message lapsed, the range left what the consumer
    # holds, it was no longer found away and asked again, and what it was handed waited
    # in it for as long as user code hung (an audit: 10-20 s late, another consumer idle).
    client.configure_queue(queue, dispatch="shared")
    with client.consumer(queue, visibility_timeout_s=2, max_processing_s=2, max_in_flight=1) as hung:
        client.send(queue, b"held")
        client.flush()
        held = wait_for(lambda: hung.receive(0.2), 60, what="the message user code holds, then hangs")
        with client.consumer(queue, visibility_timeout_s=30) as other:
            back = wait_for(lambda: other.receive(0.2), 60, what="the held message, lapsed")
            assert (back.id, back.delivery_count) == (held.id, 2)
            back.ack()
            wait_for(lambda: hung.stats.get("lapsed"), 30, what="the hung consumer's lapse")
            lapsed_at, i = time.monotonic(), 0
            # One at a time, for a few keepalive rounds (0.5 s) after the lapse: each would go
            # to any consumer that asked.
            while i < 6 or time.monotonic() - lapsed_at < 3.0:
                (sent,) = client.send_batch(queue, [b"later-%d" % i])
                client.flush()
                got = wait_for(lambda: other.receive(0.2), 30, what=f"later-{i} at the consumer that works")
                assert got.id == sent
                got.ack()
                i += 1
        assert hung.stats["received"] == 1  # it asked for nothing while hung

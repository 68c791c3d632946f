"""A consumer whose process stalled (SIGSTOP, a suspended VM) past the visibility timeout
must not hand user code what the tracker took back meanwhile and another consumer acked
(kmq.consumer.stale): neither what it had read ahead, nor what waited on its lane for the
stall to end (kmq.consumer.lane_age). Here the stall is the flusher's (no keepalive, no
credit) and the receiving thread's (no receive); its length, three visibility timeouts,
is what is tested."""

from __future__ import annotations

import time

import pytest

import kmq
from tests.conftest import wait_for
from tests.integration.views import queue_detail

pytestmark = pytest.mark.usefixtures("tracker")

VISIBILITY_S = 3
STALL_S = 3 * VISIBILITY_S


def stall_until(ends_at: float) -> None:
    """The rest of the stall: its length is the behaviour under test, not a wait for an event."""
    time.sleep(max(0.0, ends_at - time.monotonic()))


def drain_elsewhere(client: kmq.Client, queue: str, wanted: set[str]) -> set[str]:
    """Another consumer gets and acks ``wanted`` (what the stalled one held, once the tracker
    took it back); returns what it acked."""
    acked: set[str] = set()
    with client.consumer(queue, visibility_timeout_s=30) as other:
        def drain():
            for m in other.receive_batch(10, timeout_s=0.2):
                m.ack()
                acked.add(m.id)
            return acked >= wanted
        wait_for(drain, 60, what="the other consumer to get and ack what the stalled one held")
        other.flush()
    return acked


def nothing_acked_reaches_user_code(stalled: kmq.Consumer, stall_ends: float, acked: set[str]) -> None:
    """Once the stall is over, the stalled consumer hands out none of ``acked`` and says it
    dropped what it held (or read) that the tracker had taken back."""
    stall_until(stall_ends)
    late = [m.id for m in stalled.receive_batch(100, timeout_s=2)]
    assert not set(late) & acked, f"handed after the stall, acked elsewhere: {late}"
    assert stalled.stats.get("stale-dropped", 0) >= 1


def test_read_ahead_taken_back_during_a_stall_never_reaches_user_code(shared_settings, queue):
    # Shared mode: in partition mode the stalled consumer's group membership (librdkafka's
    # heartbeats go on in-process) keeps the partition, so nobody else could take the
    # messages; the same check guards both modes' hand-out (Consumer.receive*).
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, dispatch="shared", max_deliveries=10)
        sent = {client.send(queue, f"m{i}".encode()) for i in range(10)}
        client.flush()
        stalled = client.consumer(queue, visibility_timeout_s=VISIBILITY_S, max_in_flight=10)
        try:
            first = wait_for(lambda: stalled.receive(0.2), 60, what="a first message")
            wait_for(lambda: stalled._in_flight >= 2, 30, what="more read ahead")
            stalled._stop_flusher()  # the stall: nothing keeps what it holds invisible
            stall_ends = time.monotonic() + STALL_S
            acked = drain_elsewhere(client, queue, sent - {first.id})
            nothing_acked_reaches_user_code(stalled, stall_ends, acked)
        finally:
            stalled.close(0)


def test_a_delivery_that_waited_out_a_stall_on_the_lane_never_reaches_user_code(shared_settings, queue, tracker):
    # Before: read after the stall, it was counted from its arrival, looked fresh and was
    # handed out as delivery 1 of messages another consumer had acked.
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, dispatch="shared", max_deliveries=10)
        stalled = client.consumer(queue, visibility_timeout_s=VISIBILITY_S, max_in_flight=10)
        try:
            client.send(queue, b"warm")  # a first delivery: the lane's latency to measure against
            client.flush()
            wait_for(lambda: stalled.receive(0.2), 60, what="the first message").ack()
            stalled.flush()
            wait_for(lambda: (queue_detail(tracker, queue) or {}).get("in_flight") == 0, 30,
                     what="the first message settled")
            stalled._stop_flusher()  # the stall: no keepalive, no credit, and no receive below
            stall_ends = time.monotonic() + STALL_S
            with stalled._lock:  # its last word before the stall: a lease that outlasts the sends
                stalled._writer.send_soft(stalled._source.credit(time.monotonic(), force=True))
            sent = {client.send(queue, f"m{i}".encode()) for i in range(10)}
            client.flush()
            wait_for(lambda: (queue_detail(tracker, queue) or {}).get("in_flight", 0) >= 1, 30,
                     what="a delivery on its way to the stalled consumer")
            acked = drain_elsewhere(client, queue, sent)
            nothing_acked_reaches_user_code(stalled, stall_ends, acked)
        finally:
            stalled.close(0)


def test_read_ahead_a_live_consumer_holds_past_its_visibility_timeout_is_kept(shared_settings, queue):
    # The counterpart: a range counts as extended once its EXTEND is written (the writer's
    # confirmation), and a live consumer's keepalive goes on, so nothing is dropped or redelivered.
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, dispatch="shared", max_deliveries=10)
        sent = {client.send(queue, f"m{i}".encode()) for i in range(10)}
        client.flush()
        with client.consumer(queue, visibility_timeout_s=VISIBILITY_S, max_in_flight=10,
                             max_processing_s=60) as live:
            first = wait_for(lambda: live.receive(0.2), 60, what="a first message")
            wait_for(lambda: live._in_flight == 10, 30, what="the rest read ahead")
            stall_until(time.monotonic() + STALL_S)  # user code busy with the first, not a stall
            got = [first, *live.receive_batch(100, timeout_s=0.5)]
            assert len(got) == 10 and {m.id for m in got} == sent and {m.delivery_count for m in got} == {1}
            assert live.stats.get("stale-dropped", 0) == 0
            got.pop(0).ack()
            for m in got:
                m.ack()

"""A consumer whose process stalled (SIGSTOP, a suspended VM) past the visibility timeout
must not hand user code what it had read ahead: the tracker took it back meanwhile and
another consumer acked it (kmq.consumer.stale). Here the stall is the flusher's (no
keepalive), and the receiving thread comes back after another consumer acked everything."""

from __future__ import annotations

import pytest

import kmq
from tests.conftest import wait_for

pytestmark = pytest.mark.usefixtures("tracker")


def test_read_ahead_taken_back_during_a_stall_never_reaches_user_code(shared_settings, queue):
    # Shared mode: in partition mode the stalled consumer's group membership (librdkafka's
    # heartbeats go on in-process) keeps the partition, so nobody else could take the
    # messages; the same check guards both modes' hand-out (Consumer.receive*).
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, dispatch="shared", max_deliveries=10)
        sent = {client.send(queue, f"m{i}".encode()) for i in range(10)}
        client.flush()
        stalled = client.consumer(queue, visibility_timeout_s=2, max_in_flight=10)
        try:
            first = wait_for(lambda: stalled.receive(0.2), 60, what="a first message")
            wait_for(lambda: stalled._in_flight >= 2, 30, what="more read ahead")
            stalled._stop_flusher()  # the stall: nothing keeps what it holds invisible
            acked: set[str] = set()
            with client.consumer(queue, visibility_timeout_s=30) as other:
                def drain():
                    for m in other.receive_batch(10, timeout_s=0.2):
                        m.ack()
                        acked.add(m.id)
                    return acked >= sent - {first.id}
                wait_for(drain, 60, what="the other consumer to get and ack what the stalled one held")
                other.flush()
            late = [m.id for m in stalled.receive_batch(100, timeout_s=0.5)]
            assert not set(late) & acked, f"handed after the stall, acked elsewhere: {late}"
            assert stalled.stats.get("stale-dropped", 0) >= 1
        finally:
            stalled.close(0)

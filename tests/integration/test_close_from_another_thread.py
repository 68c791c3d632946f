"""``close()`` from another thread than the one receiving (a supervisor, a signal handler):
the receive loop ends, nothing is handed out once close() began, and every message comes
back to the next consumer (an audit, 2026-11-29: in partition mode the woken receive
fetched and handed out 5 more after close() had given back what it held; their acks were
taken silently and never sent)."""

from __future__ import annotations

import threading
import time

from tests.conftest import partition_mode, wait_for

MAX_IN_FLIGHT = 5


def test_closing_from_another_thread_ends_the_receive_loop_and_hands_out_nothing_after(
        tracker, shared_settings, make_client, queue, mode):
    client = make_client(shared_settings)
    if mode == "partition":
        partition_mode(client, queue)
    client.send_batch(queue, [b"%d" % i for i in range(20)])
    client.flush()
    c = client.consumer(queue, max_in_flight=MAX_IN_FLIGHT)
    got: list[tuple[float, object]] = []
    errors: list[BaseException] = []

    def receive_all():  # never settles: the receive waits for room once it holds 5
        try:
            for m in c:
                got.append((time.monotonic(), m))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            errors.append(exc)

    t = threading.Thread(target=receive_all)
    t.start()
    wait_for(lambda: len(got) >= MAX_IN_FLIGHT, 60, what="a full consumer")
    closing_at = time.monotonic()
    c.close()
    t.join(30)
    assert not t.is_alive() and errors == []  # the loop ended, no ConsumerClosedError
    assert [m for at, m in got if at >= closing_at] == []  # before: 5 more in partition mode
    assert len(got) == MAX_IN_FLIGHT
    values: set[bytes] = set()
    with client.consumer(queue) as again:
        def all_back():
            m = again.receive(0.5)
            if m is not None:
                values.add(m.value)
                m.ack()
            return len(values) == 20
        wait_for(all_back, 60, what="every message back")

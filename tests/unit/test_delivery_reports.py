"""kmq.aio's per-send delivery futures at their seam: a producer's delivery reports, served on
a thread while a sender waits (kmq.kafka.delivery_reports), each resolving its own future.
The producer is a fake here (the broker part: tests/integration/test_aio.py); the embedded
broker accepts every record, so a refused one is only reachable at this seam."""

import asyncio
import threading

import pytest

from kmq.aio import _resolve
from kmq.errors import DeliveryError
from kmq.kafka.delivery_reports import DeliveryReports
from tests.conftest import wait_for


class FakeProducer:
    """poll() serves the reports queued so far, like librdkafka's."""

    def __init__(self):
        self.reports = []
        self.polls = 0
        self.lock = threading.Lock()

    def poll(self, timeout_s):
        with self.lock:
            self.polls += 1
            served, self.reports = self.reports, []
        for report, err in served:
            report(err, None)
        return len(served)


def test_a_waiting_sender_gets_its_own_report_and_an_error_names_the_queue():
    producer = FakeProducer()
    reports = DeliveryReports(producer)

    async def send_and_wait(queue, err):
        loop = asyncio.get_running_loop()
        delivered = loop.create_future()
        producer.reports.append((lambda e, _r: loop.call_soon_threadsafe(_resolve, delivered, e, queue), err))
        reports.expect()
        try:
            await delivered
        finally:
            reports.done()

    async def main():
        ok, refused = await asyncio.gather(send_and_wait("orders", None),
                                           send_and_wait("emails", "MSG_SIZE_TOO_LARGE"),
                                           return_exceptions=True)
        assert ok is None
        assert isinstance(refused, DeliveryError) and "'emails'" in str(refused)
        assert "MSG_SIZE_TOO_LARGE" in str(refused)
    try:
        asyncio.run(main())
    finally:
        reports.close()


def test_it_polls_while_a_sender_waits_sleeps_when_none_does_and_close_stops_it():
    producer = FakeProducer()
    reports = DeliveryReports(producer)
    assert producer.polls == 0  # nobody waiting: no poll at all
    reports.expect()
    wait_for(lambda: producer.polls > 0, 10, what="a poll while a sender waits")
    reports.done()
    # Back to sleep on its event (cleared only once nobody waits): no idle wake-ups.
    wait_for(lambda: not reports._wake.is_set(), 10, what="the thread asleep")
    reports.close()
    assert not reports._thread.is_alive()


def test_a_report_for_a_sender_that_stopped_waiting_is_dropped():
    async def main():
        delivered = asyncio.get_running_loop().create_future()
        delivered.cancel()
        _resolve(delivered, "late error", "orders")  # no InvalidStateError
        assert delivered.cancelled()
    asyncio.run(main())


@pytest.mark.parametrize("err", [None, "boom"])
def test_resolve_sets_the_future_once(err):
    async def main():
        delivered = asyncio.get_running_loop().create_future()
        _resolve(delivered, err, "q")
        _resolve(delivered, err, "q")
        return delivered
    fut = asyncio.run(main())
    assert (fut.exception() is None) == (err is None)


def test_close_while_a_poll_is_under_way_still_stops_the_thread():
    # The race a bench run hung on: close() set the wake-up while the thread was in poll(),
    # and the thread, seeing nobody waiting, cleared it and slept for ever (close() joined it).
    in_poll, go_on = threading.Event(), threading.Event()

    class SlowProducer(FakeProducer):
        def poll(self, timeout_s):
            in_poll.set()
            go_on.wait(10)
            return 0

    reports = DeliveryReports(SlowProducer())
    reports.expect()
    assert in_poll.wait(10)
    reports.done()  # nobody waits any more ...
    closer = threading.Thread(target=reports.close)
    closer.start()
    wait_for(lambda: reports._closed, 10, what="close() under way")
    go_on.set()  # ... and only now does the poll return
    closer.join(10)
    assert not closer.is_alive(), "close() hung: the thread slept through it"

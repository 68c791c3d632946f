"""The broker unavailable at start and mid-run (through a proxy that cuts and restores
connectivity; the broker keeps its data). The SDK says what it waits for; sends, receives
and acks made during an outage complete when it returns; a tracker worker survives and
redelivers afterwards. Nothing is lost."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

import kmq
from kmq.kafka.admin import ensure_topics
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.errors import BrokerUnavailableError
from kmq.settings import Settings
from tests.chaos.tcp_proxy import TcpProxy
from tests.conftest import wait_for

OUTAGE_S = 5.0


@pytest.fixture(scope="module")
def proxied(artifacts, tmp_path_factory):
    """A broker of its own that advertises the proxy's port, and settings that go through it."""
    proxy = TcpProxy(upstream_port=0)  # its port bound now; where to, once the broker listens
    broker = EmbeddedBroker(log_path=artifacts / "broker-proxied.log", advertised_port=proxy.port).start()
    try:  # from here on, a failure stops the broker too
        proxy.upstream_port = broker.port
        proxy.restore()
        tag = uuid.uuid4().hex[:6]
        settings = Settings.from_env(
            {}, bootstrap_servers=f"127.0.0.1:{proxy.port}", profile="embedded", app_id=f"kmq-outage-{tag}",
            queue_partitions=2, markers_partitions=2, dlq_partitions=1, web_port=free_port(),
            data_dir=str(tmp_path_factory.mktemp("outage-data")), visibility_timeout_s=2.0,
            group_prefix=f"{tag}.", dispatch="partition")  # the SDK alone, without a tracker to dispatch
        wait_for(lambda: _try(ensure_topics, settings), 30, what="the proxied broker")
        yield settings, proxy
    finally:
        proxy.close()
        broker.stop()


def _try(fn, *args):
    try:
        fn(*args)
        return True
    except kmq.KmqError:
        return False


def outage(proxy: TcpProxy, seconds: float) -> threading.Thread:
    """Cut now, restore after ``seconds`` (in the background)."""
    proxy.cut()
    t = threading.Timer(seconds, proxy.restore)
    t.start()
    return t


def test_unreachable_broker_is_a_clear_error_naming_the_address_and_the_wait(proxied):
    settings, proxy = proxied
    proxy.cut()
    try:
        with kmq.Client(settings=settings) as client:  # makes no connection yet
            started = time.monotonic()
            with pytest.raises(BrokerUnavailableError) as info:
                client.partition_count(settings.queue_topic, timeout_s=2.0)
            assert time.monotonic() - started < 10
            assert settings.bootstrap_servers in str(info.value) and "within 2s" in str(info.value)
    finally:
        proxy.restore()


def test_sends_receives_and_acks_during_an_outage_complete_when_it_returns(proxied, queue):
    settings, proxy = proxied
    with kmq.Client(settings=settings) as client:
        before = client.send_batch(queue, [b"before %d" % i for i in range(50)])
        client.flush()
        with client.consumer(queue, visibility_timeout_s=10) as c:
            held = []
            wait_for(lambda: held.extend(c.receive_batch(50, 0.2)) or len(held) >= 50, 30, what="50")
            assert sorted(m.id for m in held) == sorted(before)
            cut_at = time.monotonic()
            proxy.cut()
            during = client.send_batch(queue, [b"during %d" % i for i in range(50)])  # buffered
            for m in held:
                m.ack()  # recorded, sent when the broker is back
            assert c.receive_batch(10, 0.5) == []  # receiving during the outage waits, no error
            with pytest.raises(BrokerUnavailableError, match=settings.bootstrap_servers):
                client.flush(timeout_s=1.0)  # says what it waits for
            # Restored only now, however long the above took on a slow machine (all of it is
            # meant to happen during the outage), and OUTAGE_S after the cut at the earliest.
            restored = threading.Timer(max(0.0, cut_at + OUTAGE_S - time.monotonic()), proxy.restore)
            restored.start()
            client.flush(timeout_s=30.0)
            c.flush(timeout_s=30.0)
            flushed_at = time.monotonic()
            restored.join()
            # It did wait for the broker: the flushes could not complete before the restore.
            assert flushed_at - cut_at >= OUTAGE_S, flushed_at - cut_at
            got = []
            wait_for(lambda: got.extend(c.receive_batch(100, 0.2)) or len(got) >= 50, 60,
                     what="the messages sent during the outage")
            assert sorted(m.id for m in got) == sorted(during), "lost or duplicated across the outage"
            for m in got:
                m.ack()
            c.flush()  # durable: no error means every ack, those made during the outage too, is written


def test_a_tracker_survives_an_outage_mid_run_and_redelivers_afterwards(proxied, artifacts, queue):
    settings, proxy = proxied
    tracker = TrackerProcess(settings, artifacts / "tracker-outage.log").start(timeout_s=120)
    try:
        with kmq.Client(settings=settings) as client:
            ids = client.send_batch(queue, [b"m%d" % i for i in range(20)])
            client.flush()
            with client.consumer(queue, visibility_timeout_s=2) as c:
                got = []
                wait_for(lambda: got.extend(c.receive_batch(20, 0.2)) or len(got) >= 20, 30, what="20")
                for m in got[:10]:
                    m.ack()
                c.flush()
                # The other 10 fall due while the broker is away (visibility 2 s < outage).
                c._stop.set()  # no keepalive from here: this consumer stops holding them
                outage(proxy, OUTAGE_S).join()
                assert tracker.process is not None and tracker.process.poll() is None, "tracker died"
                back = []
                wait_for(lambda: back.extend(c.receive_batch(20, 0.2)) or len(back) >= 10, 60,
                         what="the 10 unacked messages redelivered after the outage")
                assert sorted(m.id for m in back) == sorted(ids[10:]) and {m.delivery_count for m in back} == {2}
                for m in back:
                    m.ack()
                c.flush()
                assert c.receive_batch(20, 3.0) == [], "an acked message came back"
        assert tracker.health() is not None
    finally:
        tracker.stop()

"""README.md's consumer calls with bad arguments, on the real embedded broker.

``c.receive(timeout_s=5)`` and ``c.receive_batch(500, timeout_s=1)``: a timeout that is
not a number of seconds, or a batch size below one, is a ConfigError naming the argument.
Before, ``receive(float("nan"))`` polled for ever (a busy loop), a string was a TypeError
from deep inside, and ``receive_batch(0)`` fetched messages and returned none of them.
"""

from __future__ import annotations

import time

import pytest

import kmq

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.fixture
def consumer(shared_settings, make_client, queue):
    client = make_client(shared_settings)
    with client.consumer(queue, visibility_timeout_s=30) as c:
        yield c


def test_a_receive_timeout_that_is_not_seconds_is_refused_at_once(consumer):
    started = time.monotonic()
    for timeout in (float("nan"), "1", True, [1]):
        with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a number of seconds"):
            consumer.receive(timeout)
        with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a number of seconds"):
            consumer.receive_batch(10, timeout)
    assert time.monotonic() - started < 20  # at once; a bound far from machine speed (nan polled for ever)


def test_a_receive_batch_size_below_one_or_not_whole_is_refused(consumer):
    for count in (0, -1, 2.5, "10", True, None):
        with pytest.raises(kmq.ConfigError, match=r"max_messages=.* must be a whole number >= 1"):
            consumer.receive_batch(count, 0.1)


def test_a_negative_timeout_is_one_look_without_waiting(shared_settings, make_client, queue):
    client = make_client(shared_settings)
    client.send(queue, b"x")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        m = c.receive(60)
        assert m is not None and m.value == b"x"
        m.ack()
        started = time.monotonic()
        assert c.receive(-1) is None and c.receive_batch(10, -1) == []
        assert time.monotonic() - started < 20  # one look each; a bound far from machine speed


def test_configure_queue_none_restores_the_default_of_every_setting(shared_settings, make_client, queue):
    # configure_queue's contract: "None restores the global default". dead_letter=None and
    # backoff=None were ConfigErrors ("must be True or False", "must be a kmq.Backoff").
    client = make_client(shared_settings)
    client.configure_queue(queue, dead_letter=False, backoff=kmq.Backoff.fixed(5), max_deliveries=2)
    cfg = client.configure_queue(queue, dead_letter=None, backoff=None, max_deliveries=None)
    assert (cfg.dead_letter, cfg.backoff, cfg.max_deliveries) == (True, kmq.Backoff.none(), None)


def test_configure_queue_refuses_spread_none_naming_the_spread_and_keeps_it(shared_settings, make_client, queue):
    # A spread only grows, so None has no default to restore: it was ignored silently.
    client = make_client(shared_settings)
    client.configure_queue(queue, spread=2)
    with pytest.raises(kmq.ConfigError, match=r"spread=None .* spread over 2 partition.* a number >= 2"):
        client.configure_queue(queue, spread=None, max_deliveries=7)
    assert client.queue_config(queue).spread == 2 and client.queue_config(queue).max_deliveries != 7


def test_a_dedup_id_repeated_on_a_partition_mode_queue_is_delivered_twice(shared_settings, make_client, queue):
    # README: dedup is the dispatcher's, so it holds on shared queues only; a queue in
    # partition mode has no dispatcher and delivers both (docs/ordering.md says so).
    from tests.conftest import partition_mode, wait_for

    client = make_client(shared_settings)
    partition_mode(client, queue)
    first, again = client.send(queue, b"1", dedup_id="txn-991"), client.send(queue, b"2", dedup_id="txn-991")
    client.flush()
    assert first == again
    got: list[bytes] = []
    with client.consumer(queue, visibility_timeout_s=30) as c:
        def step():
            for m in c.receive_batch(10, 0.5):
                got.append(m.value)
                m.ack()
            return len(got) >= 2
        wait_for(step, 60, what="both sends")
    assert sorted(got) == [b"1", b"2"]


def test_flush_and_close_refuse_a_timeout_that_is_not_seconds_and_close_stays_possible(
        shared_settings, make_client, queue, tracker):
    # close(float("nan")) marked the consumer closed, then failed: its verbs were never sent
    # and a second close() did nothing. Now it is refused before anything happens.
    client = make_client(shared_settings)
    client.send(queue, b"x")
    client.flush()
    c = client.consumer(queue, visibility_timeout_s=30)
    m = c.receive(60)
    assert m is not None
    m.ack()
    for bad in ("1", float("nan"), float("inf"), -1, True):
        with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a finite number of seconds, 0 or more"):
            c.flush(bad)
        with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a finite number of seconds, 0 or more"):
            c.close(bad)
    c.close()  # sends the ack: the tracker counts it, nothing is left in flight
    from tests.conftest import wait_for
    from tests.integration.views import all_acked
    wait_for(lambda: all_acked(tracker, queue, 1), 30, what="the ack close() sent")


def test_configure_queue_refuses_max_processing_below_the_visibility_timeout(shared_settings, make_client, queue):
    # A consumer refuses the pair; configure_queue stored it, and extend() was then bounded
    # below the visibility timeout. Other changes of such a stored queue are not blocked.
    client = make_client(shared_settings)
    with pytest.raises(kmq.ConfigError, match=r"max_processing_s=10 is below visibility_timeout_s=60 of "):
        client.configure_queue(queue, visibility_timeout_s=60, max_processing_s=10)
    client.configure_queue(queue, visibility_timeout_s=5, max_processing_s=10)
    with pytest.raises(kmq.ConfigError, match=r"max_processing_s=10 is below visibility_timeout_s=60"):
        client.configure_queue(queue, visibility_timeout_s=60)
    assert client.configure_queue(queue, max_deliveries=3).max_processing_s == 10


def test_a_queue_visibility_grown_past_a_consumers_own_max_processing_caps_at_it(shared_settings, make_client,
                                                                                 queue):
    # README: a consumer's own arguments win. The change raised in the flusher: the consumer
    # stayed on the old visibility, raised the error from an unrelated receive(), and
    # followed no later change of the same queue.
    from tests.conftest import wait_for

    client = make_client(shared_settings)
    client.configure_queue(queue, visibility_timeout_s=30)
    with client.consumer(queue, max_processing_s=40) as c:
        client.send(queue, b"a")
        c.receive(timeout_s=30).ack()
        client.configure_queue(queue, visibility_timeout_s=60)
        wait_for(lambda: c.config.visibility_timeout_s == 60, 30, what="the consumer to see the change")
        assert (c.visibility_timeout_s, c.max_processing_s) == (40, 40)
        client.send(queue, b"b")
        assert c.receive(timeout_s=30).value == b"b"
        client.configure_queue(queue, visibility_timeout_s=20)
        wait_for(lambda: c.visibility_timeout_s == 20, 30, what="the next change to be followed")
        assert c.max_processing_s == 40


@pytest.mark.parametrize("spread", [True, 1.0])
def test_a_spread_equal_to_the_current_one_but_not_a_whole_number_is_refused(shared_settings, make_client,
                                                                            queue, spread):
    # True == 1.0 == 1: the check ran only for a spread that differed, so these passed silently.
    with pytest.raises(kmq.ConfigError, match=r"spread=.* must be a whole number from 1 to 1024"):
        make_client(shared_settings).configure_queue(queue, spread=spread)


def test_a_queue_is_assigned_only_to_a_tenant_that_exists(shared_settings, make_client, queue):
    # README: create_tenant("acme") returns a token; configure_queue(q, tenant="acme")
    # assigns a queue. A misspelt tenant was stored silently: no tenant's token reached it.
    client = make_client(shared_settings)
    name = f"t{queue[-8:]}"
    with pytest.raises(kmq.ConfigError, match=rf"tenant='{name}x' is no tenant .*create_tenant\('{name}x'\)"):
        client.configure_queue(queue, tenant=f"{name}x")
    with pytest.raises(kmq.ConfigError, match=r"tenant.*'Bad Name!'"):  # what is wrong with it
        client.configure_queue(queue, tenant="Bad Name!")
    client.create_tenant(name)
    assert client.configure_queue(queue, tenant=name).tenant == name
    assert client.configure_queue(queue, tenant=None).tenant is None

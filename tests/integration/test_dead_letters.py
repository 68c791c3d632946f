"""Dead-letter operations and purges on a real broker: list, redrive exactly once (a redrive
taken over by another ending in one error line), purge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kmq
from kmq.dev.devstack import settings_env
from tests.conftest import wait_for
from tests.integration.views import tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(shared_settings):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def reject_all(client, queue, n, reason="bad"):
    with client.consumer(queue, visibility_timeout_s=30) as c:
        got = []
        wait_for(lambda: got.extend(c.receive_batch(n, 0.2)) or len(got) >= n, 20, what="messages")
        for m in got:
            m.reject(reason if int(m.value[1:]) % 2 == 0 else "other")
        c.flush()
    wait_for(lambda: len(client.dead_letters(queue)) >= n, 20, what="dead letters")


def test_dead_letters_are_listed_with_their_history_and_filtered(client, queue):
    ids = client.send_batch(queue, [b"m%d" % i for i in range(6)], headers={"u": b"1"})
    client.flush()
    reject_all(client, queue, 6)
    dead = client.dead_letters(queue)
    assert sorted(d.id for d in dead) == sorted(ids)
    d = dead[0]
    assert d.headers == {"u": b"1"} and d.deliveries == 1 and d.reason == "rejected"
    assert d.first_delivery_ms <= d.last_delivery_ms <= d.dead_lettered_ms
    assert len([x for x in dead if x.detail == "bad"]) == 3
    assert len(client.dead_letters(queue, min_age_s=3600)) == 0
    assert len(client.dead_letters(queue, limit=2)) == 2


def test_redrive_moves_each_dead_letter_back_exactly_once_even_when_interrupted(client, queue):
    ids = client.send_batch(queue, [b"m%d" % i for i in range(40)])
    client.flush()
    reject_all(client, queue, 40)
    # Interrupt the first redrive after its first transaction of 10.
    class Stop(Exception):
        pass

    def stop_after_first(done, total):
        raise Stop()
    with pytest.raises(Stop):
        client.redrive(queue, batch_size=10, progress=stop_after_first)
    assert len(client.dead_letters(queue)) == 30
    result = client.redrive(queue, batch_size=10, rate_per_s=1000)  # the rerun
    assert (result.moved, result.remaining) == (30, 0)
    assert client.redrive(queue).moved == 0  # and a third run has nothing left
    with client.consumer(queue, visibility_timeout_s=30) as c:
        got = []
        wait_for(lambda: got.extend(c.receive_batch(100, 0.2)) or len(got) >= 40, 20, what="redriven")
        assert c.receive(1.5) is None
        assert sorted(m.id for m in got) == sorted(ids)  # each once, same ids
        assert {m.delivery_count for m in got} == {1}     # delivery count reset
        for m in got:
            m.ack()


def test_redrive_filters_by_reason_and_age_and_keeps_the_rest(client, queue, shared_settings):
    client.send_batch(queue, [b"m%d" % i for i in range(10)])
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        def step():
            for m in c.receive_batch(100, 0.2):
                if int(m.value[1:]) < 5:
                    m.reject("bad")  # the others time out until max_deliveries
            return len(client.dead_letters(queue)) >= 10
        wait_for(step, 60, what="5 rejected and 5 exhausted dead letters")
    reasons = sorted(d.reason for d in client.dead_letters(queue))
    assert reasons == ["max-deliveries"] * 5 + ["rejected"] * 5
    assert client.redrive(queue, min_age_s=3600).moved == 0  # none is an hour old
    r = client.redrive(queue, reason="max-deliveries")
    assert (r.moved, r.remaining) == (5, 5)
    assert {d.reason for d in client.dead_letters(queue)} == {"rejected"}


def test_redrive_is_rate_bounded(client, queue):
    client.send_batch(queue, [b"m%d" % i for i in range(30)])
    client.flush()
    reject_all(client, queue, 30)
    import time
    t0 = time.monotonic()
    assert client.redrive(queue, rate_per_s=20, batch_size=5).moved == 30
    assert time.monotonic() - t0 >= 30 / 20 - 5 / 20  # the last batch needs no wait


def test_a_redrive_taken_over_by_another_ends_in_its_one_error_line(client, queue, shared_settings):
    # docs/cli.md promises one error line; librdkafka added its own "%4|...|TERMINATE|..."
    # line for the fenced transaction's records still queued (an audit).
    client.send_batch(queue, [b"m%d" % i for i in range(10)])
    client.flush()
    reject_all(client, queue, 10)
    env = {**os.environ, **settings_env(shared_settings)}
    redrive = [sys.executable, "-m", "kmq.cli", "dlq", "redrive", queue, "--batch-size", "1"]
    first = subprocess.Popen([*redrive, "--rate", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=ROOT, env=env)
    try:
        # Past its init_transactions (one moved), or the second would be the one fenced.
        wait_for(lambda: len(client.dead_letters(queue)) < 10 or first.poll() is not None, 60,
                 what="the first redrive's first move")
        second = subprocess.run(redrive, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        assert second.returncode == 0, second.stderr
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"another redrive of '{queue}' took over" in errors[0], stderr
    assert "rdkafka" not in stderr and "Traceback" not in stderr, stderr
    assert client.dead_letters(queue) == []  # the second moved what remained


def test_purging_dead_letters_drops_them(client, queue):
    client.send_batch(queue, [b"m%d" % i for i in range(5)])
    client.flush()
    reject_all(client, queue, 5)
    assert client.purge_dead_letters(queue) == 5
    assert client.dead_letters(queue) == []
    assert client.redrive(queue).moved == 0


@pytest.mark.parametrize("dispatch", ["shared", "partition"])
def test_purging_a_queue_drops_enqueued_in_flight_and_scheduled_messages(client, queue, tracker, dispatch):
    if dispatch == "partition":
        client.configure_queue(queue, dispatch="partition")
        tracker_sees(tracker, queue, dispatch="partition")
    client.send_batch(queue, [b"old%d" % i for i in range(20)])
    client.send(queue, b"scheduled", delay_s=6)  # due while we still listen below
    client.flush()
    with client.consumer(queue, visibility_timeout_s=2, batch_size=20) as c:
        held = wait_for(lambda: c.receive_batch(5, 0.2), 20, what="some in flight")
        point = client.purge(queue)
        assert sum(point.values()) >= 20
        # At once: this client's consumers take the purge point before purge() returns. An
        # audit, receiving right after it, got messages read ahead below it (a consumer took
        # new settings only every 0.5 s): 4 of 6 runs shared, 1 of 7 partition.
        assert c.config.purged_before == point
        client.send(queue, b"new")
        client.flush()
        got = []

        def new_arrives():
            for m in c.receive_batch(100, 0.2):
                got.append(m.value)
                m.ack()
            return b"new" in got
        wait_for(new_arrives, 20, what="the message sent after the purge")
        assert got == [b"new"]  # nothing prefetched before the purge is handed out
        for m in held:
            m.ack()  # stale: the purge already forgot them
        # No in-flight redelivery (visibility 2 s), no scheduled send (it was purged).
        assert c.receive(5.0) is None

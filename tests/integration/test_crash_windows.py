"""Seed 003's crash windows: a consumer that dies between its START and its offset commit.

Plainly, both the group (offsets not committed) and the tracker (START seen)
deliver those messages again: duplicates. With KMQ_TRANSACTIONAL_STARTS the
START and the commit are one transaction: the window is closed.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import kill_when_ready, partition_mode, wait_for

HELPER = Path(__file__).parent / "helpers" / "start_then_die.py"

pytestmark = pytest.mark.usefixtures("tracker")


def deliveries_after_death(make_client, settings, queue: str, n: int, mode: str) -> Counter:
    client = make_client(settings)
    partition_mode(client, queue)  # the window of group consumers: fetched, STARTed, not committed
    ids = client.send_batch(queue, [b"m%d" % i for i in range(n)])
    client.flush()
    kill_when_ready(HELPER, [queue, str(n), mode], settings)
    seen: Counter = Counter()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        def all_back():
            batch = c.receive_batch(100, 0.2)
            for m in batch:
                seen[m.id] += 1
            batch.ack()
            return set(seen) >= set(ids)
        wait_for(all_back, 60, what="every message after the consumer died")
        # Long enough for the tracker to redeliver whatever it tracked (visibility 2 s).
        quiet_until = time.monotonic() + 6
        while time.monotonic() < quiet_until:
            batch = c.receive_batch(100, 0.2)
            for m in batch:
                seen[m.id] += 1
            batch.ack()
    assert set(seen) == set(ids), "a message was lost"
    return seen


def test_plain_starts_leave_the_window_open_duplicates(make_client, shared_settings, queue):
    seen = deliveries_after_death(make_client, shared_settings, queue, 30, "plain")
    assert max(seen.values()) == 2  # refetched by the group and redelivered by the tracker


def test_transactional_starts_close_the_window_no_duplicates(make_client, shared_settings, queue):
    seen = deliveries_after_death(make_client, shared_settings, queue, 30, "transactional")
    assert set(seen.values()) == {1}


def test_transactional_consumer_runs_the_whole_flow(make_client, shared_settings, queue):
    client = make_client(shared_settings)
    client.send_batch(queue, [b"a", b"b", b"c"])
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1.5, transactional=True) as c:
        got = []
        wait_for(lambda: got.extend(c.receive_batch(3, 0.2)) or len(got) >= 3, 30, what="3")
        keep = [m for m in got if m.value != b"b"]
        for m in keep:
            m.ack()
        c.flush()
        again = wait_for(lambda: c.receive(0.2), 20, what="the unacked one again")
        assert again.value == b"b" and again.delivery_count == 2
        again.ack()
        c.flush()
        assert c.receive(3.0) is None

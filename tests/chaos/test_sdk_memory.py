"""SDK memory is bounded by max_in_flight: a consumer over a backlog many times larger
never holds more than max_in_flight messages, and its RSS stays flat while it drains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmq.kafka.backpressure import produce_when_room
from kmq.dev.devstack import settings_env
from kmq.protocol.placement import queue_partitions

HELPER = Path(__file__).parent / "helpers" / "bounded_consumer.py"
ROOT = Path(__file__).resolve().parents[2]
BACKLOG = 150_000
SIZE_BYTES = 1024  # 150 MB of payload: far more than the bound below
MAX_IN_FLIGHT = 500
# What the process may grow by, whatever the backlog: librdkafka's prefetch queue
# (queued.max.messages.kbytes, set to 16 MiB here; 64 MiB by default), one fetch
# response, max_in_flight messages and the allocator's slack.
PREFETCH_KBYTES = 16 * 1024
RSS_GROWTH_BOUND_MB = 64  # (measured: 30-36)


@pytest.mark.slow
@pytest.mark.usefixtures("tracker")  # a shared queue (the default) is served by its dispatcher
def test_a_consumer_never_holds_more_than_max_in_flight_and_its_memory_stays_bounded(shared_settings, queue):
    s = shared_settings
    p = Producer({**s.client_config(), "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576})
    part = queue_partitions(queue, s.queue_partitions)[0]
    payload = b"x" * SIZE_BYTES
    for _ in range(BACKLOG):
        produce_when_room(p, s.queue_topic, payload, queue.encode(), partition=part)
    assert p.flush(60) == 0
    env = {**os.environ, **settings_env(s), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(HELPER), queue, str(BACKLOG), str(MAX_IN_FLIGHT),
                          str(PREFETCH_KBYTES)], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print({k: (v if k != "rss_mb" else [round(x) for x in v]) for k, v in r.items()})
    assert r["received"] == BACKLOG
    assert r["max_in_flight"] <= MAX_IN_FLIGHT and r["max_held_records"] <= MAX_IN_FLIGHT
    assert r["max_in_flight"] >= MAX_IN_FLIGHT - 200  # it did run at its bound
    growth = max(r["rss_mb"]) - r["rss_mb"][0]
    assert growth < RSS_GROWTH_BOUND_MB, f"RSS grew {growth:.0f} MB draining {BACKLOG * SIZE_BYTES >> 20} MB"

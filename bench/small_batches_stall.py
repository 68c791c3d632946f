"""Does a shared queue deliver and redeliver beside a partition of N one-record batches?

    python -m bench.small_batches_stall 40000

A whole stack on the embedded broker (tracker worker, shared mode, one queue
partition): N records of another queue are written first, one per batch (a producer
flushed after every record); then one message is sent to queue ``q`` and one shared
consumer waits up to 60 s for it, and, not acking it, up to 60 s for its redelivery
(visibility timeout 2 s). Prints both times or "none", and each reader's raised fetch
wait (kmq.kafka.fetch_wait). docs/shared-queues.md ("A limit of the embedded broker") has
what it measured: none in 60 s at 40,000 before the rising wait, 14.7-16.1 s after. Not
saved to bench/results.
"""

from __future__ import annotations

import sys
import tempfile
import time

from confluent_kafka import Producer

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.kafka.admin import ensure_topics
from kmq.settings import Settings

WAIT_S = 60.0


def first_within(consumer, timeout_s: float):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        m = consumer.receive(0.5)
        if m is not None:
            return m, time.monotonic() - t0
    return None, None


def main() -> None:
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 40_000
    with EmbeddedBroker() as broker:
        s = Settings.from_env({}, bootstrap_servers=broker.bootstrap_servers, profile="embedded",
                              app_id="stall", queue_partitions=1, markers_partitions=1, dlq_partitions=1,
                              data_dir=tempfile.mkdtemp(prefix="kmq-bench-"), web_port=free_port(),
                              dispatch="shared", visibility_timeout_s=2.0, max_processing_s=0.0)
        ensure_topics(s)
        p = Producer(s.client_config())
        t0 = time.monotonic()
        for _ in range(batches):
            p.produce(s.queue_topic, b"x" * 100, b"other", partition=0)
            p.flush(30)
        print(f"wrote {batches} one-record batches in {time.monotonic() - t0:.1f} s", flush=True)
        tracker = TrackerProcess(s, tempfile.mktemp(prefix="kmq-bench-tracker-", suffix=".log"))
        tracker.start(timeout_s=120)
        client = kmq.Client(settings=s)
        try:
            client.send("q", b"hello")
            client.flush()
            with client.consumer("q") as consumer:
                m, took = first_within(consumer, WAIT_S)
                print(f"first delivery: {'none in %g s' % WAIT_S if m is None else '%.2f s' % took}")
                if m is not None:
                    again, took = first_within(consumer, WAIT_S)
                    print(f"redelivery: {'none in %g s' % WAIT_S if again is None else '%.2f s after' % took}")
        finally:
            client.close()
            tracker.stop()


if __name__ == "__main__":
    main()

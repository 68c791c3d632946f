"""Does a shared queue deliver and redeliver beside a partition of N one-record batches?

    python -m bench.small_batches_stall 40000 [--where queue|markers]

A whole stack on the embedded broker (tracker worker, shared mode, one queue
partition): N records are written first, one per batch (a producer flushed after
every record): records of another queue to the queue partition (``--where queue``,
the dispatcher reads through them), or ACK markers of ranges nobody started to the
markers partition (``--where markers``, the tracker's Faust consumer reads through
them, as tests/integration/test_small_batches.py); then one message is sent to queue ``q`` and one shared
consumer waits up to 60 s for it, and, not acking it, up to 60 s for its redelivery
(visibility timeout 2 s). Prints both times or "none", and each reader's raised fetch
wait (kmq.kafka.fetch_wait, from the tracker's log). docs/shared-queues.md ("A limit of the embedded broker") has
what it measured: none in 60 s at 40,000 before the rising wait, 14.7-16.1 s after. Not
saved to bench/results.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import kmq
from bench.broker_batches import fill_one_per_batch
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.kafka.admin import ensure_topics
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
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
    ap = argparse.ArgumentParser()
    ap.add_argument("batches", type=int, nargs="?", default=40_000)
    ap.add_argument("--where", choices=("queue", "markers"), default="queue")
    args = ap.parse_args()
    batches = args.batches
    with EmbeddedBroker() as broker:
        s = Settings.from_env({}, bootstrap_servers=broker.bootstrap_servers, profile="embedded",
                              app_id="stall", queue_partitions=1, markers_partitions=1, dlq_partitions=1,
                              data_dir=tempfile.mkdtemp(prefix="kmq-bench-"), web_port=free_port(),
                              dispatch="shared", visibility_timeout_s=2.0, max_processing_s=0.0)
        ensure_topics(s)
        t0 = time.monotonic()
        if args.where == "queue":
            topic, value, key = s.queue_topic, b"x" * 100, b"other"
        else:
            topic, key = s.markers_topic, b"filler"
            value = marker_codec.encode([M.Ack(M.RangeRef("filler", 0, 0, 1), 1)])
        fill_one_per_batch(s.client_config(), topic, batches, value, key)
        print(f"wrote {batches} one-record batches to {topic} in {time.monotonic() - t0:.1f} s", flush=True)
        log = Path(tempfile.mktemp(prefix="kmq-bench-tracker-", suffix=".log"))
        tracker = TrackerProcess(s, log)
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
        for line in log.read_text(errors="replace").splitlines():
            if "fetch wait" in line:
                found = re.search(r"\] ([^,]+, \S+): (fetch wait \S+ \S+ \d+ ms)", line)
                print("tracker:", " ".join(found.groups()) if found else line[:200])


if __name__ == "__main__":
    main()

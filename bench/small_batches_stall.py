"""Does a shared queue deliver and redeliver beside a partition of N one-record batches?

    python -m bench.small_batches_stall 40000 [--where queue|markers|changelog]

A whole stack on the embedded broker (tracker worker, shared mode, one queue
partition): N records are written first, one per batch (a producer flushed after
every record): records of another queue to the queue partition (``--where queue``,
the dispatcher reads through them), or ACK markers of ranges nobody started to the
markers partition (``--where markers``, the tracker's Faust consumer reads through
them, as tests/integration/test_small_batches.py); then one message is sent to queue ``q`` and one shared
consumer waits up to 60 s for it, and, not acking it, up to 60 s for its redelivery
(visibility timeout 2 s). Prints both times or "none", and each reader's raised fetch
wait (kmq.kafka.fetch_wait, from the tracker's log). docs/shared-queues.md ("A limit of
the embedded broker") has what it measured: none in 60 s at 40,000 before the rising
wait, 14.7-16.1 s after.

``--where changelog``: a tracker acquires one message for a consumer that holds it, stops,
and its changelog partition gets N one-record copies of that range's entry (the embedded
profile writes a record per batch); a tracker started on an empty data dir is timed to
ready, and the held message's ack to applied (18.7-20.4 s to ready at 40,000, 6.6-6.8 s
at 1,000). Not saved to bench/results.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

import kmq
from bench.broker_batches import fill_one_per_batch
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.kafka.acls import changelog_topic
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
    ap.add_argument("--where", choices=("queue", "markers", "changelog"), default="queue")
    args = ap.parse_args()
    if args.where == "changelog":
        return changelog_recovery(args.batches)
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
        print_raised_waits(log)


def changelog_recovery(batches: int) -> None:
    with EmbeddedBroker() as broker:
        s = Settings.from_env({}, bootstrap_servers=broker.bootstrap_servers, profile="embedded",
                              app_id="stall", queue_partitions=1, markers_partitions=1, dlq_partitions=1,
                              data_dir=tempfile.mkdtemp(prefix="kmq-bench-"), web_port=free_port(),
                              dispatch="shared")
        ensure_topics(s)
        log = Path(tempfile.mktemp(prefix="kmq-bench-tracker-", suffix=".log"))
        tracker = TrackerProcess(s, log)
        with kmq.Client(settings=s) as client, client.consumer("q", visibility_timeout_s=600) as c:
            try:
                tracker.start(timeout_s=120)
                client.send("q", b"hello")
                client.flush()
                held, _ = first_within(c, WAIT_S)
                entry = None
                deadline = time.monotonic() + WAIT_S
                while entry is None and time.monotonic() < deadline:
                    entry = last_range_entry(s)
            finally:
                tracker.stop()
            if held is None or entry is None:
                raise SystemExit("no delivery or no range entry in the changelog within 60 s")
            t0 = time.monotonic()
            fill_one_per_batch(s.client_config(), changelog_topic(s), batches, entry.value(), entry.key())
            print(f"wrote {batches} one-record batches to {changelog_topic(s)} in {time.monotonic() - t0:.1f} s")
            shutil.rmtree(s.data_dir)
            t0 = time.monotonic()
            tracker = TrackerProcess(s, log)
            try:
                tracker.start(timeout_s=600)
                print(f"tracker ready on an empty data dir after {time.monotonic() - t0:.1f} s", flush=True)
                t0 = time.monotonic()
                held.ack()
                c.flush()
                while time.monotonic() - t0 < WAIT_S:
                    d = queue_view(tracker, "q")
                    if d and d["in_flight"] == 0 and d["since_start"].get("acked", 0) >= 1:
                        print(f"the held message's ack applied {time.monotonic() - t0:.2f} s after it was sent")
                        break
                    time.sleep(0.01)  # the poll's pace, not a wait for something
                else:
                    print(f"the held message's ack not applied in {WAIT_S:g} s")
            finally:
                tracker.stop()
    print_raised_waits(log)


def last_range_entry(s):
    """The changelog's last record of an in-flight range (key ``R...``), or None."""
    reader = Consumer({**s.client_config(), "group.id": "bench-changelog", "enable.auto.commit": False,
                       "enable.partition.eof": True})
    try:
        reader.assign([TopicPartition(changelog_topic(s), 0, 0)])
        got = []
        while True:
            batch = reader.consume(500, 2.0)
            got += [r for r in batch if r.error() is None]
            if not batch or any(r.error() is not None for r in batch):
                break
        ranges = [r for r in got if r.key()[:1] == b"R" and r.value() is not None]
        return ranges[-1] if ranges else None
    finally:
        reader.close()


def queue_view(tracker, queue: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{tracker.url}/kmq/api/queues/{queue}", timeout=10) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def print_raised_waits(log: Path) -> None:
    for line in log.read_text(errors="replace").splitlines():
        if "fetch wait" in line:
            found = re.search(r"\] ([^,]+, \S+): (fetch wait \S+ \S+ \d+ ms)", line)
            print("tracker:", " ".join(found.groups()) if found else line[:200])


if __name__ == "__main__":
    main()

"""How fast the broker hands one reader a partition: the bound on a dispatcher's read.

    python -m bench.broker_fetch [--records 200000] [--size 100] [--runs 3]

The embedded broker alone (no tracker, no kmq code): ``--records`` records of ``--size``
bytes with a queue key and a ``kmq.id`` header, as the SDK sends them, written to one
partition; then read from its start by one librdkafka consumer the way the dispatcher
reads (``consume`` of up to 20,000, 10 ms fetch wait, 5 ms fetch queue backoff), once per fetch size: 1 MiB
(librdkafka's default, the dispatcher's) and 8 MiB. Reports records a second and the
reading thread's CPU per record (the rest of the wall time is the broker's).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import median, save
from kmq.dev.embedded import EmbeddedBroker

FETCH_BYTES = (1 << 20, 8 << 20)
CHUNK_RECORDS = 20_000  # as agents/dispatch/reader.py reads
FETCH_QUEUE_BACKOFF_MS = 5  # as agents/dispatch/reader.py sets it


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the future is done
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(30)


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    value = b"f" * size
    for i in range(records):
        p.produce(topic, key=b"tenant-flood", value=value, partition=0,
                  headers=[("kmq.id", b"0123456789abcdef0123456789abcdef")])
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError("the records were not all written within 120 s")


def read_all(bootstrap: str, topic: str, records: int, fetch_bytes: int) -> dict:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fetch", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "queued.max.messages.kbytes": 16 * 1024,
                  # As the dispatcher's reader: librdkafka's default (1 s) pauses fetching
                  # whenever 100,000 records wait in its queue, which a fast fetch reaches
                  # (runs before 2026-11-28 lacked this: 143k-156k records/s, the pauses').
                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                  "max.partition.fetch.bytes": fetch_bytes})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = 0, time.monotonic() + 300
        t0, cpu0 = time.perf_counter(), time.thread_time()
        while got < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {got} of {records} records in 300 s")
            got += sum(1 for r in c.consume(CHUNK_RECORDS, 0.05) if r.error() is None)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    finally:
        c.close()
    return {"fetch_bytes": fetch_bytes, "seconds": round(wall, 3), "records_s": round(records / wall),
            "reader_cpu_us_per_record": round(cpu / records * 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmq-bench-"))
    runs = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        for run in range(args.runs):
            topic = f"fetch-{run}"
            create_topic(broker.bootstrap_servers, topic)
            fill(broker.bootstrap_servers, topic, args.records, args.size)
            for fb in FETCH_BYTES if run % 2 == 0 else reversed(FETCH_BYTES):  # alternate who goes first
                runs.append({"run": run, **read_all(broker.bootstrap_servers, topic, args.records, fb)})
                print(runs[-1], flush=True)
    summary = {str(fb): median([r["records_s"] for r in runs if r["fetch_bytes"] == fb]) for fb in FETCH_BYTES}
    path = save("broker_fetch", {"command": f"python -m bench.broker_fetch --records {args.records} "
                                            f"--size {args.size} --runs {args.runs}",
                                 "records": args.records, "size": args.size, "runs": runs,
                                 "median_records_s": summary})
    print(f"median records/s by fetch size: {summary}; saved {path}")


if __name__ == "__main__":
    main()

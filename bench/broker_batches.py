"""How the embedded broker serves a partition of many small batches, per fetch wait.

    python -m bench.broker_batches [--batches 1000 16000 40000] [--waits 10 20 50 100]

The embedded broker alone (no kmq code): each partition gets ``--batches`` records of
100 bytes, one record per batch (a producer flushed after every record, as a trickle
of ``send_and_wait`` calls writes them). One librdkafka reader per fetch wait then
reads one record, three times, from the middle of the partition (as the tracker's
payload reader and the dispatcher read). Reports the milliseconds per read, or
"none" when no record came within ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.broker_fetch import create_topic
from bench.common import save
from kmq.dev.embedded import EmbeddedBroker


def fill_one_per_batch(config: dict, topic: str, batches: int, value: bytes = b"x" * 100,
                       key: bytes = b"k") -> None:
    """``batches`` records to partition 0 of ``topic``, one per batch (a flush after each)."""
    p = Producer({**config, "linger.ms": 0})
    for _ in range(batches):
        p.produce(topic, value, key, partition=0)
        if p.flush(30):
            raise RuntimeError("a record was not written within 30 s")


def read_one(bootstrap: str, topic: str, offset: int, wait_ms: int, timeout_s: float) -> float | None:
    """Seconds until the record at ``offset`` came, or None if it did not within ``timeout_s``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-batches", "enable.auto.commit": False,
                  "fetch.wait.max.ms": wait_ms, "fetch.queue.backoff.ms": 10})
    try:
        t0 = time.monotonic()
        c.assign([TopicPartition(topic, 0, offset)])
        while time.monotonic() - t0 < timeout_s:
            if any(r.error() is None for r in c.consume(1, 0.2)):
                return time.monotonic() - t0
        return None
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[1000, 16000, 40000])
    ap.add_argument("--waits", type=int, nargs="+", default=[10, 20, 50, 100])
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmq-bench-"))
    rows = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        for n in args.batches:
            topic = f"batches-{n}"
            create_topic(broker.bootstrap_servers, topic)
            fill_one_per_batch({"bootstrap.servers": broker.bootstrap_servers}, topic, n)
            for wait_ms in args.waits:
                reads = [read_one(broker.bootstrap_servers, topic, n // 2 + i * 200, wait_ms, args.timeout)
                         for i in range(3)]
                row = {"batches": n, "fetch_wait_ms": wait_ms,
                       "read_ms": [None if r is None else round(r * 1000) for r in reads]}
                print(f"{n:>6} single-record batches, fetch wait {wait_ms:>4} ms: "
                      + ", ".join("none" if r is None else f"{r}" for r in row["read_ms"]) + " ms", flush=True)
                rows.append(row)
    save("broker_batches", {"command": "python -m bench.broker_batches " + " ".join(
        f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()),
        "timeout_s": args.timeout, "rows": rows})


if __name__ == "__main__":
    main()

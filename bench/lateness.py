"""Redelivery and delayed-delivery lateness: how long after its deadline a message is republished.

Redelivery: messages are enqueued, then START markers for them are written
straight to the markers topic (a consumer that takes them and dies), spread
over time, with visibility timeouts of 1-3 s. The tracker republishes each
when its deadline passes; lateness = the republished record's timestamp
minus its deadline (``kmq.first-delivery-ms`` + timeout: both the tracker's
clock, so the figure is the tracker's own precision).

Delayed delivery: ``send(delay_s=...)`` with delays of 1-3 s; lateness = the
published record's timestamp minus its due time (``kmq.enqueued-ms``).

``--load`` runs a send/receive/ack workload on another queue meanwhile.

    python -m bench.lateness [--messages 2000] [--seconds 10] [--runs 3] [--load]
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

import kmq
from bench.common import save, stack
from kmq.protocol import envelope
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(args) -> dict:
    with stack(max_deliveries=100, dispatch="partition") as (settings, _t, _b):
        client = kmq.Client(settings=settings)
        n_parts = client.partition_count(settings.queue_topic)
        queue = "lateness"
        p = queue_partitions(queue, n_parts)[0]
        # Plain records (no kmq.id): a redelivery's id is then partition:offset,
        # which maps it back to its START's timeout.
        raw = Producer(settings.client_config())
        for _ in range(args.messages):
            raw.produce(settings.queue_topic, b"x" * 100, queue.encode(), partition=p)
        raw.flush()
        stop = threading.Event()
        load = threading.Thread(target=_load, args=(client, stop), daemon=True) if args.load else None
        if load:
            load.start()
        markers = Producer(settings.client_config())
        mp = markers_partition(queue, settings.markers_partitions)
        timeouts: dict[int, int] = {}
        per_start = max(1, args.messages // (args.seconds * 20))
        t_end = time.monotonic() + args.seconds
        offset = 0
        delayed_due: list[int] = []
        while offset < args.messages and time.monotonic() < t_end:
            n = min(per_start, args.messages - offset)
            timeout_ms = random.randint(1000, 3000)
            r = M.RangeRef(queue, p, offset, offset + n)
            markers.produce(settings.markers_topic, marker_codec.encode([M.Start(r, timeout_ms, r.full_mask)]),
                            queue.encode(), partition=mp)
            markers.poll(0)
            for o in range(offset, offset + n):
                timeouts[o] = timeout_ms
            offset += n
            delay = random.uniform(1.0, 3.0)
            client.send(f"{queue}-delayed", b"d", delay_s=delay)
            delayed_due.append(1)
            time.sleep(0.05)
        markers.flush()
        client.flush()
        redelivery = _collect(settings, queue, p, offset, lambda ours: _redelivery_lateness(ours, timeouts))
        delayed = _collect(settings, f"{queue}-delayed",
                           queue_partitions(f"{queue}-delayed", n_parts)[0], len(delayed_due),
                           _delayed_lateness)
        stop.set()
        if load:
            load.join(30)
    out = {}
    for name, xs in (("redelivery", redelivery), ("delayed", delayed)):
        out[name] = {"samples": len(xs), "p50_ms": percentile(xs, 0.5), "p99_ms": percentile(xs, 0.99),
                     "max_ms": max(xs), "mean_ms": statistics.mean(xs)}
        print(f"{name}: n={len(xs)} p50 {out[name]['p50_ms']:.0f} ms p99 {out[name]['p99_ms']:.0f} ms "
              f"max {out[name]['max_ms']:.0f} ms", flush=True)
    return out


def summarize(runs: list[dict]) -> dict:
    """Per kind: each run's figures, and the median of each figure over the runs."""
    out = {}
    for name in ("redelivery", "delayed"):
        per_run = [r[name] for r in runs]
        out[name] = {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}
        out[name]["samples"] = sum(r["samples"] for r in per_run)
        out[name]["runs"] = per_run
    return out


def _redelivery_lateness(rec, timeouts) -> float | None:
    ours, _ = envelope.split(rec.headers())
    if envelope.DELIVERIES not in ours:
        return None  # an original record, not a redelivery
    first = envelope.int_header(ours, envelope.FIRST_DELIVERY_MS, 0)
    source = ours.get(envelope.ID, b"").decode()
    original_offset = int(source.split(":")[1]) if ":" in source else None
    if original_offset is None or original_offset not in timeouts:
        return None
    return rec.timestamp()[1] - (first + timeouts[original_offset])


def _delayed_lateness(rec) -> float | None:
    ours, _ = envelope.split(rec.headers())
    due = envelope.int_header(ours, envelope.ENQUEUED_MS, 0)
    return rec.timestamp()[1] - due if due else None


def _collect(settings, queue: str, partition: int, expect: int, measure) -> list[float]:
    """Read the queue's partition until ``expect`` records were measured (or 60 s)."""
    c = Consumer({**settings.client_config(), "group.id": f"lateness-{queue}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(settings.queue_topic, partition, 0)])
    out: list[float] = []
    deadline = time.monotonic() + 60
    while len(out) < expect and time.monotonic() < deadline:
        for rec in c.consume(1000, 0.2):
            if rec.error() is None and rec.key() == queue.encode():
                v = measure(rec)
                if v is not None:
                    out.append(v)
    c.close()
    return out


def _load(client: kmq.Client, stop: threading.Event) -> None:
    """A send/receive/ack workload on another queue while lateness is measured."""
    with client.consumer("load", visibility_timeout_s=30, max_in_flight=20000, batch_size=5000) as c:
        while not stop.is_set():
            client.send_batch("load", [b"y" * 100] * 5000)
            batch = c.receive_batch(5000, 0.2)
            batch.ack()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--runs", type=int, default=3, help="each on a fresh broker and tracker")
    args = ap.parse_args()
    res = summarize([run(args) for _ in range(args.runs)])
    name = "lateness-load" if args.load else "lateness"
    path = save(name, {"command": f"python -m bench.lateness --messages {args.messages} "
                                  f"--seconds {args.seconds} --runs {args.runs}"
                                  f"{' --load' if args.load else ''}", **res})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

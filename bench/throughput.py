"""Throughput: kmq receive -> ack (tracker running) vs a plain consumer-group consume+commit loop.

Both loops read *the same records*: a queue's partition of the queue topic,
filled once by the SDK (``send_batch``, whose rate is reported too). Every queue of an
invocation has a partition of its own (names picked by their placement on a queue topic
with enough partitions): a new group starts at its partition's beginning, so on a
partition shared with an earlier queue the kmq loop read through the other queue's
records to find its n (and the plain loop, which counts every record, read the other
queue's). The
plain loop is a consumer group that commits every batch asynchronously; the
kmq loop receives, acks every message and waits until the acks are durable.
Runs alternate which goes first (A B, B A, ...), so the ratio holds on a
noisy shared machine. CPU seconds of this process (consumer), the tracker
and the broker are reported per 100k messages: that is kmq's real cost,
visible even where the broker's fetch rate is the bottleneck. So is the time this
process spent in Python's cyclic garbage collector during each loop (``gc.callbacks``):
a consumer holding thousands of records in flight pays full collections over them.
``--gc-threshold N`` sets the collector's first threshold (Python's default: 700) for
the whole process, both loops alike (docs/shared-queues.md, "Python's garbage collector").

    python -m bench.throughput [--messages 300000] [--runs 3] [--sizes 100,1024] [--compression lz4] [--payload random]
        [--gc-threshold 50000] [--note "what code"] [--save-as throughput-before]
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time

import psutil
from confluent_kafka import Consumer, TopicPartition

import kmq
from bench.common import PAYLOADS, median, payloads, save, stack
from kmq.protocol.placement import queue_partitions
from kmq.stats.gc_clock import GcClock, set_young_threshold


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_of(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    t = proc.cpu_times()
    return t.user + t.system


def plain_consume(settings, queue: str, n: int, run: int) -> float:
    """Consume the queue's n records with a consumer group, committing each batch."""
    topic = settings.queue_topic
    mine = set(queue_partitions(queue, settings.queue_partitions))
    c = Consumer({**settings.client_config(), "group.id": f"bench-plain-{queue}-{run}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    c.subscribe([topic], on_assign=lambda cons, parts: cons.assign(
        [p for p in parts if p.partition in mine]))
    first = c.poll(30)  # group join is not timed
    assert first is not None, "no record within 30 s"
    got = 1
    t0 = time.perf_counter()
    while got < n:
        # The fastest loop we found: poll() returns at the first record, then
        # consume(n, 0) takes what is queued. consume(5000, 1.0) waits for a
        # full batch and ran at half this rate on the embedded broker.
        rec = c.poll(1.0)
        if rec is None:
            continue
        batch = [rec] + c.consume(4999, 0)
        for rec in batch:
            rec.value()
        got += len(batch)
        last = batch[-1]
        c.commit(offsets=[TopicPartition(topic, last.partition(), last.offset() + 1)],
                 asynchronous=True)
    elapsed = time.perf_counter() - t0
    c.close()
    return (n - 1) / elapsed


def kmq_consume(client: kmq.Client, queue: str, n: int, batch_ack: bool = False) -> float:
    """Receive and ack n messages of one queue; the clock stops when the acks are durable.

    ``batch_ack``: ``MessageBatch.ack()`` once per batch instead of ``Message.ack()``
    per message (both ack every message).
    """
    with client.consumer(queue, visibility_timeout_s=60, max_in_flight=20000,
                         batch_size=5000) as c:
        first = c.receive(30)  # group join is not timed
        assert first is not None, "no message within 30 s"
        first.ack()
        got = 1
        t0 = time.perf_counter()
        while got < n:
            batch = c.receive_batch(5000, timeout_s=1.0)
            if batch_ack:
                for m in batch:
                    m.value
                batch.ack()
            else:
                for m in batch:
                    m.value
                    m.ack()
            got += len(batch)
        c.flush()
        elapsed = time.perf_counter() - t0
    return (n - 1) / elapsed


def own_partition(name: str, partitions: int, used: set[int]) -> str:
    """``name``, or ``name-1``, ``name-2`` ...: the first on a queue partition not in ``used``
    (added to it), so each loop reads its own records and nothing else."""
    for i in itertools.count():
        queue = f"{name}-{i}" if i else name
        (p,) = queue_partitions(queue, partitions)
        if p not in used:
            used.add(p)
            return queue
    raise AssertionError("unreachable")


def timed(fn, procs):
    """(rate, [CPU s of this process, of each of procs..., GC s of this process])."""
    with GcClock() as clock:
        before = [cpu_self()] + [cpu_of(p) for p in procs]
        rate = fn()
        after = [cpu_self()] + [cpu_of(p) for p in procs]
    return rate, [a - b for a, b in zip(after, before)] + [clock.total_s]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--payload", choices=PAYLOADS, default="repeated",
                    help="payload bytes: one repeated byte (compresses to almost nothing) or random, "
                    "each message its own (before 2026-11-26: one random payload repeated)")
    ap.add_argument("--compression", default="", help="KMQ_COMPRESSION of the SDK's and tracker's producers "
                    "(default: the profile's)")
    ap.add_argument("--gc-threshold", type=int, default=0,
                    help="gc.set_threshold(N, ...) for this process (0: Python's default, 700)")
    ap.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    ap.add_argument("--save-as", default="throughput",
                    help="result file bench/results/NAME.json (an earlier run's: throughput-...)")
    args = ap.parse_args()
    n = args.messages
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.gc_threshold:
        set_young_threshold(args.gc_threshold)
    results = {}
    with stack(compression=args.compression, dispatch="partition",
               queue_partitions=max(8, 2 * 3 * args.runs * len(sizes))) as (settings, tracker_proc, broker_proc):
        client = kmq.Client(settings=settings)
        used: set[int] = set()
        procs = [psutil.Process(tracker_proc.process.pid), psutil.Process(broker_proc.process.pid)]
        for size in sizes:
            rows: dict[str, list] = {k: [] for k in (
                "plain_msgs_s", "kmq_msgs_s", "kmq_batch_ack_msgs_s", "ratio", "ratio_batch_ack",
                "send_msgs_s", "plain_cpu_s_per_100k", "kmq_consumer_cpu_s_per_100k",
                "kmq_batch_ack_consumer_cpu_s_per_100k", "kmq_tracker_cpu_s_per_100k",
                "plain_gc_s_per_100k", "kmq_gc_s_per_100k")}
            for run in range(args.runs):
                queues = {w: own_partition(f"bench-{size}-{run}-{w}", settings.queue_partitions, used)
                          for w in ("plain", "kmq", "batch")}
                t0 = time.perf_counter()
                for q in queues.values():
                    client.send_batch(q, payloads(args.payload, size, n))
                client.flush(300)
                rows["send_msgs_s"].append(3 * n / (time.perf_counter() - t0))
                order = ["plain", "kmq", "batch"]
                order = order[run % 3:] + order[:run % 3]  # rotate who goes first
                for which in order:
                    q = queues[which]
                    if which == "plain":
                        rate, cpu = timed(lambda: plain_consume(settings, q, n, run), procs)
                        rows["plain_msgs_s"].append(rate)
                        rows["plain_cpu_s_per_100k"].append(cpu[0] * 1e5 / n)
                        rows["plain_gc_s_per_100k"].append(cpu[-1] * 1e5 / n)
                    elif which == "kmq":
                        rate, cpu = timed(lambda: kmq_consume(client, q, n), procs)
                        rows["kmq_msgs_s"].append(rate)
                        rows["kmq_consumer_cpu_s_per_100k"].append(cpu[0] * 1e5 / n)
                        rows["kmq_tracker_cpu_s_per_100k"].append(cpu[1] * 1e5 / n)
                        rows["kmq_gc_s_per_100k"].append(cpu[-1] * 1e5 / n)
                    else:
                        rate, cpu = timed(lambda: kmq_consume(client, q, n, batch_ack=True), procs)
                        rows["kmq_batch_ack_msgs_s"].append(rate)
                        rows["kmq_batch_ack_consumer_cpu_s_per_100k"].append(cpu[0] * 1e5 / n)
                rows["ratio"].append(rows["kmq_msgs_s"][-1] / rows["plain_msgs_s"][-1])
                rows["ratio_batch_ack"].append(rows["kmq_batch_ack_msgs_s"][-1] / rows["plain_msgs_s"][-1])
                print(f"{size} B run {run} ({'/'.join(order)}): plain {rows['plain_msgs_s'][-1]:,.0f}/s"
                      f"  kmq {rows['kmq_msgs_s'][-1]:,.0f}/s ({rows['ratio'][-1]:.2f})"
                      f"  kmq batch-ack {rows['kmq_batch_ack_msgs_s'][-1]:,.0f}/s"
                      f" ({rows['ratio_batch_ack'][-1]:.2f})  send {rows['send_msgs_s'][-1]:,.0f}/s"
                      f"  cpu/100k: plain {rows['plain_cpu_s_per_100k'][-1]:.2f}s"
                      f" kmq {rows['kmq_consumer_cpu_s_per_100k'][-1]:.2f}s"
                      f" batch {rows['kmq_batch_ack_consumer_cpu_s_per_100k'][-1]:.2f}s"
                      f" tracker {rows['kmq_tracker_cpu_s_per_100k'][-1]:.2f}s"
                      f"  gc/100k: plain {rows['plain_gc_s_per_100k'][-1]:.3f}s"
                      f" kmq {rows['kmq_gc_s_per_100k'][-1]:.3f}s", flush=True)
            results[str(size)] = {k: {"runs": [round(x, 4) for x in v], "median": round(median(v), 4)}
                                  for k, v in rows.items()}
            r = results[str(size)]
            print(f"{size} B median: plain {r['plain_msgs_s']['median']:,.0f}/s  "
                  f"kmq {r['kmq_msgs_s']['median']:,.0f}/s ({r['ratio']['median']:.2f})  "
                  f"kmq batch-ack {r['kmq_batch_ack_msgs_s']['median']:,.0f}/s "
                  f"({r['ratio_batch_ack']['median']:.2f})  "
                  f"send {r['send_msgs_s']['median']:,.0f}/s", flush=True)
    path = save(args.save_as, {"command": "python -m bench.throughput " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("note", "save_as")), "results": results,
        **({"note": args.note} if args.note else {})})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

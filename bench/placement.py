"""Logical queues on shared topics: read amplification, and fairness under a flood.

Read amplification: Q equally busy queues share a P-partition queue topic.
One queue's kmq consumer fetches only its queue's partitions; we measure
bytes fetched (librdkafka's per-partition rxbytes) per byte of its own
messages delivered. kafka-mq-go's design (every queue's group reads the whole
topic and filters by key) is measured the same way, as the baseline.

Fairness: tenant B sends a message every 20 ms and times send -> receive,
first alone, then while tenant A floods its own queue (on another partition,
and on B's partition), to state how far a flood moves B's latency.

    python -m bench.placement amplification [--queues 100] [--partitions 16] [--per-queue 2000]
        [--dispatch shared]   # shared queues, bytes written too: bench/shared_bytes.py
    python -m bench.placement fairness [--flood 300000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from confluent_kafka import Consumer

import kmq
from bench.common import PAYLOADS, save, stack
from bench.shared_bytes import shared_amplification
from kmq.protocol.placement import queue_partitions


def _payload(size: int) -> bytes:
    return b"x" * size


def fetched_bytes_per_delivered(settings, client, queue: str, expect: int, whole_topic: bool) -> dict:
    """Consume ``expect`` messages of ``queue``; librdkafka's rxbytes over delivered bytes."""
    stats: list[dict] = []
    conf = {"statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s))}
    delivered_bytes = 0
    got = 0
    if whole_topic:
        # kafka-mq-go: the queue's group reads every partition and filters by key.
        # Steady state: it keeps reading the whole topic, so measure to the end of it.
        c = Consumer({**settings.client_config(), "group.id": f"mqgo-{queue}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "enable.partition.eof": True,
                      "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10, **conf})
        c.subscribe([settings.queue_topic])
        deadline = time.monotonic() + 120
        at_end: set[int] = set()
        parts = len(c.list_topics(settings.queue_topic).topics[settings.queue_topic].partitions)
        while len(at_end) < parts and time.monotonic() < deadline:
            for rec in c.consume(5000, 0.5):
                if rec.error() is not None:
                    at_end.add(rec.partition())
                elif rec.key() == queue.encode():
                    got += 1
                    delivered_bytes += len(rec.value()) + len(rec.key()) + sum(
                        len(k) + len(v or b"") for k, v in rec.headers() or [])
        c.poll(0.5)
        c.close()
    else:
        with client.consumer(queue, visibility_timeout_s=60, max_in_flight=20000,
                             config=conf) as c:
            deadline = time.monotonic() + 120
            while got < expect and time.monotonic() < deadline:
                batch = c.receive_batch(5000, 0.5)
                for m in batch:
                    rec = m[0]
                    delivered_bytes += len(rec.value()) + len(rec.key()) + sum(
                        len(k) + len(v or b"") for k, v in rec.headers() or [])
                batch.ack()
                got += len(batch)
            c._source._kc.poll(0.5)  # one more statistics callback
    last = stats[-1]
    parts = last["topics"][settings.queue_topic]["partitions"]
    rx = sum(p["rxbytes"] for k, p in parts.items() if k != "-1")
    msgs = sum(p["rxmsgs"] for k, p in parts.items() if k != "-1")
    return {"delivered": got, "delivered_bytes": delivered_bytes, "fetched_bytes": rx,
            "fetched_records": msgs, "amplification": rx / max(1, delivered_bytes)}


def amplification(args) -> dict:
    results = {}
    with stack(queue_partitions=args.partitions, dispatch="partition") as (settings, _t, _b):
        client = kmq.Client(settings=settings)
        queues = [f"tenant{i:03d}" for i in range(args.queues)]
        payload = _payload(args.size)
        for _ in range(args.per_queue // 100):  # interleaved, as concurrent producers would
            for q in queues:
                client.send_batch(q, [payload] * 100)
        client.flush(300)
        sharing = {}
        for q in queues:
            p = queue_partitions(q, args.partitions)[0]
            sharing[p] = sharing.get(p, 0) + 1
        sample = queues[: args.sample]
        kmq_amp = []
        for q in sample:
            r = fetched_bytes_per_delivered(settings, client, q, args.per_queue, whole_topic=False)
            r["queues_on_its_partition"] = sharing[queue_partitions(q, args.partitions)[0]]
            kmq_amp.append(r)
            print(f"kmq {q}: {r['amplification']:.2f} ({r['queues_on_its_partition']} queues "
                  f"share its partition)", flush=True)
        base = fetched_bytes_per_delivered(settings, client, queues[-1], args.per_queue, whole_topic=True)
        print(f"kafka-mq-go design {queues[-1]}: {base['amplification']:.2f}", flush=True)
        # Equally busy queues: a queue's consumer reads its partition, so its
        # amplification is about the number of queues hashed there.
        per_queue = sorted(sharing[queue_partitions(q, args.partitions)[0]] for q in queues)
        results = {
            "queues": args.queues, "partitions": args.partitions, "per_queue": args.per_queue,
            "size": args.size, "queues_per_partition": sharing,
            "all_queues_expected": {"median": statistics.median(per_queue), "max": per_queue[-1],
                                    "mean": statistics.mean(per_queue)},
            "kmq": kmq_amp, "kmq_median": statistics.median(r["amplification"] for r in kmq_amp),
            "kmq_expected_mean": args.queues / args.partitions,
            "kafka_mq_go": base,
        }
    return results


def fairness(args) -> dict:
    out = {}
    with stack(queue_partitions=16, dispatch="partition") as (settings, _t, _b):
        client = kmq.Client(settings=settings)
        victim = "tenant-b"
        vp = queue_partitions(victim, 16)[0]
        other_partition = next(f"flood{i}" for i in range(10_000)
                               if queue_partitions(f"flood{i}", 16)[0] != vp)
        same_partition = next(f"flood{i}" for i in range(10_000)
                              if queue_partitions(f"flood{i}", 16)[0] == vp)
        for label, flooder in (("alone", None), ("flood on another partition", other_partition),
                               ("flood on the same partition", same_partition)):
            out[label] = _victim_latency(client, victim, flooder, args)
            print(f"{label}: p50 {out[label]['p50_ms']:.0f} ms p99 {out[label]['p99_ms']:.0f} ms",
                  flush=True)
    return out


def _victim_latency(client, victim: str, flooder: str | None, args) -> dict:
    stop = threading.Event()
    flood_sender = None
    if flooder is not None:
        def flood():
            fc = kmq.Client(settings=client.settings)
            sent = 0
            while not stop.is_set() and sent < args.flood:
                fc.send_batch(flooder, [b"f" * 100] * 1000)
                sent += 1000
            fc.flush(120)
        flood_sender = threading.Thread(target=flood, daemon=True)
        flood_sender.start()
    latencies = []
    sent_at: dict[str, float] = {}
    with client.consumer(victim, visibility_timeout_s=30) as c:
        c.receive(0.5)  # join the group first
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            mid = client.send(victim, b"ping")
            client.flush()
            sent_at[mid] = time.monotonic()
            m = c.receive(10)
            while m is not None:
                if m.id in sent_at:
                    latencies.append((time.monotonic() - sent_at.pop(m.id)) * 1000)
                m.ack()
                if not sent_at:
                    break
                m = c.receive(10)
    stop.set()
    if flood_sender is not None:
        flood_sender.join(120)
    latencies.sort()
    return {"samples": len(latencies), "p50_ms": latencies[len(latencies) // 2],
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1], "max_ms": latencies[-1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("amplification")
    a.add_argument("--queues", type=int, default=100)
    a.add_argument("--partitions", type=int, default=16)
    a.add_argument("--per-queue", type=int, default=2000)
    a.add_argument("--size", type=int, default=100)
    a.add_argument("--sample", type=int, default=3)
    a.add_argument("--dispatch", choices=("partition", "shared"), default="partition")
    a.add_argument("--lanes", type=int, default=0, help="deliveries topic partitions (shared; 0: default)")
    a.add_argument("--name", default="", help="shared: save with -NAME added (another code's run)")
    a.add_argument("--payload", choices=PAYLOADS, default="repeated",
                   help="payload bytes (shared): one repeated byte, or random (what compression cannot shrink)")
    a.add_argument("--compression", default="",
                   help="KMQ_COMPRESSION of the SDK's and tracker's producers (shared; default: the profile's, none)")
    f = sub.add_parser("fairness")
    f.add_argument("--flood", type=int, default=300_000)
    f.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    if args.what == "amplification":
        command = " ".join(["python -m bench.placement amplification", f"--queues {args.queues}",
                            f"--partitions {args.partitions}", f"--per-queue {args.per_queue}"])
        if args.dispatch == "shared":
            res = shared_amplification(args)
            defaults = {"size": 100, "payload": "repeated"}
            extra = "".join(f" --{k} {getattr(args, k)}" for k in ("size", "lanes", "payload", "compression")
                            if getattr(args, k) and getattr(args, k) != defaults.get(k))
            path = save(f"shared_amplification-{args.queues}q-{args.partitions}p{extra.replace(' --', '-')}"
                        .replace(" ", "") + (f"-{args.name}" if args.name else ""),
                        {"command": f"{command} --dispatch shared{extra}", **res})
        else:
            res = amplification(args)
            path = save(f"amplification-{args.queues}q-{args.partitions}p", {"command": command, **res})
    else:
        res = fairness(args)
        path = save("fairness", {"command": f"python -m bench.placement fairness --flood {args.flood}",
                                 **res})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

"""What a shared consumer costs the broker once idle, after it read ranges by reference.

    python -m bench.shared_ref_idle [--rounds 3] [--messages 50000] [--seconds 5] [--name N --note T]

One consumer of a shared queue alone on its queue partition (so its ranges come by
reference: it reads them from the queue topic with a reader of its own), in this process.
Each round: the broker's CPU while the consumer waits in ``receive_batch`` on an empty
queue (after ``SETTLE_S``), then ``--messages`` are sent and drained, then the broker's CPU
while it waits again. The difference is what the idle reference reader costs: left
assigned at the partition's end, it fetched every fetch wait (10 ms on the embedded
broker) for nothing. Also records whether the reader was still assigned after the wait.
"""

from __future__ import annotations

import argparse
import time

import psutil

import kmq
from bench.common import median, save, stack

SETTLE_S = 2.0  # the consumer waits this long before a CPU window (its reader's idle rule: 1 s)


def idle_broker_cores(consumer, broker: psutil.Process, seconds: float) -> float:
    """The broker's CPU cores while ``consumer`` waits in receive_batch on an empty queue."""
    settle = time.monotonic() + SETTLE_S
    while time.monotonic() < settle:
        consumer.receive_batch(100, 0.1)
    before, t0 = sum(broker.cpu_times()[:2]), time.monotonic()
    while time.monotonic() - t0 < seconds:
        consumer.receive_batch(100, 0.1)
    return (sum(broker.cpu_times()[:2]) - before) / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--name", default="", help="save as shared_ref_idle-NAME")
    ap.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    args = ap.parse_args()
    rows = []
    with stack(dispatch="shared") as (settings, _tracker, broker_proc):
        client = kmq.Client(settings=settings)
        broker = psutil.Process(broker_proc.process.pid)
        for i in range(args.rounds):
            queue = f"ref-idle-{i}"
            with client.consumer(queue, max_in_flight=20_000, batch_size=5000) as c:
                before = idle_broker_cores(c, broker, args.seconds)
                client.send_batch(queue, [b"x" * 100] * args.messages)
                client.flush()
                got = 0
                while got < args.messages:
                    batch = c.receive_batch(5000, 1.0)
                    batch.ack()
                    got += len(batch)
                after = idle_broker_cores(c, broker, args.seconds)
                reader = c._source.refs.kc  # the reference reader: made by the first referred range
                rows.append({"round": i, "idle_before_cores": round(before, 3), "idle_after_cores": round(after, 3),
                             "by_reference": reader is not None,
                             "reader_assigned_after": bool(reader is not None and reader.assignment())})
            print(rows[-1], flush=True)
        client.close()
    added = [r["idle_after_cores"] - r["idle_before_cores"] for r in rows]
    path = save("shared_ref_idle" + (f"-{args.name}" if args.name else ""), {
        "command": f"python -m bench.shared_ref_idle --rounds {args.rounds} --messages {args.messages} "
                   f"--seconds {args.seconds:g}",
        "results": {"rounds": rows, "added_cores_median": round(median(added), 3)},
        **({"note": args.note} if args.note else {})})
    print(f"added by an idle consumer that read references: {median(added):.3f} cores (median); saved {path}")


if __name__ == "__main__":
    main()

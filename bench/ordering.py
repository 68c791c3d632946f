"""Ordered message groups against unordered, mirroring Confluent Parallel Consumer's figure.

    python -m bench.ordering [--messages 10000] [--consumers 16] [--work-ms 2.5]
                             [--groups 100,10,1] [--one-group-messages 10000]
                             [--max-in-flight 100]
    python -m bench.ordering --rss-groups 100000    # tracker RSS while that many distinct groups pass

Parallel Consumer: 10,000 messages with 0-5 ms of work, one partition: 22.2 s in
partition order, 2.2 s in key order with 100 keys, 2.8 s unordered. Here: one queue
(spread 1, one partition), ``--consumers`` consumer processes that each handle one message
at a time with ``--work-ms`` of work (2.5 ms: the mean of 0-5 ms; a sleep, I/O-bound work)
and ``--max-in-flight`` credit (so the longest run of a group it is handed),
the backlog sent once every consumer has asked for work; seconds from the first send to
the last ack. Runs, in one session (one broker, one tracker): a single consumer of an
unordered queue (the serial baseline), ``--consumers`` on an unordered queue, then on an
ordered queue (``ordering="group"``) with each of ``--groups`` groups (round robin).
"""

from __future__ import annotations

import argparse
import time

import kmq
from bench.common import save, stack
from bench.shared import Fleet, consumers_known


def run(settings, tracker, client, queue: str, consumers: int, messages: int, work_ms: float,
        groups: int | None, max_in_flight: int = 100) -> dict:
    client.configure_queue(queue, **({"ordering": "group"} if groups else {}))
    fleet = Fleet(settings, queue, consumers, work_ms, max_in_flight=max_in_flight)
    try:
        fleet.wait(lambda: all(fleet.ready), 120, "consumers ready")
        fleet.wait(lambda: consumers_known(tracker, queue) == consumers, 60, "the consumers' credits")
        t0 = time.time()
        for i in range(messages):
            client.send(queue, b"x" * 100, **({"group": f"g{i % groups}"} if groups else {}))
        client.flush()
        fleet.wait(lambda: sum(fleet.acked) >= messages, 3600, "the backlog drained")
        elapsed = max(fleet.last_at) - t0
        return {"queue": queue, "consumers": consumers, "groups": groups, "messages": messages,
                "seconds": round(elapsed, 2), "msgs_s": round(messages / elapsed, 1),
                "consumers_with_work": sum(1 for a in fleet.acked if a)}
    finally:
        fleet.stop()


def rss(args) -> None:
    """Tracker RSS while ``--rss-groups`` messages, each of its own group, pass through an
    ordered queue (16 consumers, no work): state is per active group, not per group seen."""
    import threading

    import psutil

    with stack(deliveries_partitions=64, dispatch="shared") as (settings, tracker, _broker):
        client = kmq.Client(settings=settings)
        proc = psutil.Process(tracker.process.pid)
        queue = f"order-rss-{int(time.time()) % 100000}"
        client.configure_queue(queue, ordering="group")
        fleet = Fleet(settings, queue, args.consumers, 0, max_in_flight=1000)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], proc.memory_info().rss)
        try:
            fleet.wait(lambda: consumers_known(tracker, queue) == args.consumers, 120, "the consumers' credits")
            before = proc.memory_info().rss
            threading.Thread(target=sample, daemon=True).start()
            t0 = time.time()
            for i in range(args.rss_groups):
                client.send(queue, b"x" * 100, group=f"group-{i}")
            client.flush()
            fleet.wait(lambda: sum(fleet.acked) >= args.rss_groups, 3600, "the backlog drained")
            elapsed = max(fleet.last_at) - t0
            done.set()
            after = proc.memory_info().rss
        finally:
            fleet.stop()
    row = {"groups": args.rss_groups, "consumers": args.consumers, "seconds": round(elapsed, 1),
           "rss_before_mb": round(before / 2**20), "rss_peak_mb": round(peak[0] / 2**20),
           "rss_after_mb": round(after / 2**20)}
    print(row)
    path = save("ordering_rss", {"command": f"python -m bench.ordering --rss-groups {args.rss_groups} "
                                            f"--consumers {args.consumers}", "results": row})
    print(f"saved {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--one-group-messages", type=int, default=None,
                    help="messages of the 1-group run (default --messages)")
    ap.add_argument("--consumers", type=int, default=16)
    ap.add_argument("--work-ms", type=float, default=2.5)
    ap.add_argument("--max-in-flight", type=int, default=100,
                    help="each consumer's max_in_flight: its credit, so the longest run of a group it gets")
    ap.add_argument("--groups", default="100,10,1")
    ap.add_argument("--rss-groups", type=int, default=None, help="measure tracker RSS instead")
    args = ap.parse_args()
    if args.rss_groups:
        return rss(args)
    rows = []
    tag = f"{int(time.time()) % 100000}"
    with stack(deliveries_partitions=64, dispatch="shared") as (settings, tracker, _broker):
        client = kmq.Client(settings=settings)
        plan = [("serial", 1, args.messages, None), ("unordered", args.consumers, args.messages, None)]
        for g in (int(x) for x in args.groups.split(",")):
            n = args.one_group_messages if g == 1 and args.one_group_messages else args.messages
            plan.append((f"groups-{g}", args.consumers, n, g))
        for name, consumers, messages, groups in plan:
            row = run(settings, tracker, client, f"order-{name}-{tag}", consumers, messages,
                      args.work_ms, groups, args.max_in_flight)
            row["run"] = name
            rows.append(row)
            print(f"{name:10s} consumers={consumers:2d} messages={messages}: {row['seconds']:8.2f} s "
                  f"({row['msgs_s']} msgs/s, {row['consumers_with_work']} got work)", flush=True)
    by = {r["run"]: r for r in rows}
    serial_s_per_msg = by["serial"]["seconds"] / by["serial"]["messages"]
    for r in rows:
        per_msg = r["seconds"] / r["messages"]
        r["vs_unordered"] = round(per_msg / (by["unordered"]["seconds"] / by["unordered"]["messages"]), 2)
        r["vs_serial"] = round(per_msg / serial_s_per_msg, 2)
    argv = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                    if v is not None and k != "rss_groups")
    path = save("ordering", {"command": f"python -m bench.ordering {argv}", "work_ms": args.work_ms,
                             "results": rows})
    for r in rows:
        print(f"{r['run']:10s} {r['seconds']:8.2f} s for {r['messages']}; per message x{r['vs_unordered']} "
              f"of unordered, x{r['vs_serial']} of serial")
    print(f"saved {path}")


if __name__ == "__main__":
    main()

"""What N idle shared consumers cost: CPU of the broker, the tracker and the consumers.

    python -m bench.shared_idle [--counts 0,8,32] [--seconds 10] [--after 0]

Each row starts N consumer processes of an empty shared queue (as bench.shared scaling
does), waits until they are ready and settled (with ``--after M``: until they have drained
M messages each, a queue gone quiet after work), then samples CPU for ``--seconds``. The
embedded broker answers a fetch only when its wait is over (docs/embedded-broker.md), so an idle
consumer's lane reader asks it 20 times a second (its 50 ms wait on that broker): what
that costs bounds how many consumers a 2-core machine runs before work is counted.
"""

from __future__ import annotations

import argparse
import time

import psutil

from bench.common import save, stack
import kmq
from bench.shared import Fleet, consumers_known
from bench.shared_cpu import cpu_s

SETTLE_S = 3.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="0,8,32")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--after", type=int, default=0, help="messages per consumer drained first")
    ap.add_argument("--name", default="", help="save as shared_idle-NAME (an earlier code's run)")
    ap.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    args = ap.parse_args()
    rows = []
    with stack(dispatch="shared") as (settings, tracker, broker):
        client = kmq.Client(settings=settings)
        procs = {"tracker": [psutil.Process(tracker.process.pid)], "broker": [psutil.Process(broker.process.pid)]}
        layout = getattr(settings, "lane_layout", None)  # None: code from before lanes in several topics
        lanes = (f"{layout.topics} topic{'s' if layout.topics > 1 else ''} of {layout.per_topic} partitions"
                 if layout else f"1 topic of {settings.deliveries_partitions} partitions")
        for n in [int(x) for x in args.counts.split(",")]:
            queue = f"idle-{n}-{int(time.time())}"
            fleet = Fleet(settings, queue, n, 0, 100) if n else None
            try:
                if fleet:
                    fleet.wait(lambda: all(fleet.ready), 120, f"{n} consumers ready")
                    if args.after:
                        fleet.wait(lambda: consumers_known(tracker, queue) == n, 60, "the consumers' credits")
                        client.send_batch(queue, [b"x" * 100] * (args.after * n))
                        client.flush()
                        fleet.wait(lambda: sum(fleet.acked) >= args.after * n, 300, "the messages drained")
                time.sleep(SETTLE_S)  # the consumers' first credits and reads are not idle
                consumers = [psutil.Process(p.pid) for p in fleet.procs] if fleet else []
                before = {k: cpu_s(v) for k, v in procs.items()} | {"consumers": cpu_s(consumers)}
                time.sleep(args.seconds)
                after = {k: cpu_s(v) for k, v in procs.items()} | {"consumers": cpu_s(consumers)}
            finally:
                if fleet:
                    fleet.stop()
            cores = {k: round((after[k] - before[k]) / args.seconds, 3) for k in after}
            rows.append({"consumers": n, "after": args.after, "cpu_cores": cores, "total_cores": round(sum(cores.values()), 3)})
            print(rows[-1], flush=True)
    path = save("shared_idle" + (f"-{args.name}" if args.name else ""),
                {"command": f"python -m bench.shared_idle --counts {args.counts} "
                            f"--seconds {args.seconds:g} --after {args.after}", "results": rows,
                 "lanes": lanes, **({"note": args.note} if args.note else {})})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

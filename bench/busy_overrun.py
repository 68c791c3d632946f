"""A busy consumer's overrun: how often its message comes back twice at once.

    python -m bench.busy_overrun [--tries 6] [--busy-s 10] [--max-processing-s 3]

One consumer (``max_in_flight=1``) of a shared queue with a 1 s visibility timeout takes
a message and keeps user code busy ``--busy-s``, past its ``--max-processing-s``: the
message lapses and comes back (delivery 2) while user code is still busy, read in the
background (docs/shared-queues.md, step 4). Each try counts the copies user code gets
afterwards: 1 is right; 2 (deliveries 2 and 3 at once) says the background read's copy
timed out before its first extension reached the tracker. Own broker and tracker.
"""

from __future__ import annotations

import argparse
import time

import kmq
from bench.common import save, stack


def one_try(client: kmq.Client, queue: str, busy_s: float, max_processing_s: float) -> list[int]:
    client.configure_queue(queue, dispatch="shared", visibility_timeout_s=1,
                           max_processing_s=max_processing_s, max_deliveries=5)
    with client.consumer(queue, max_in_flight=1) as c:
        c.receive(timeout_s=0.3)
        client.send(queue, b"slow")
        client.flush()
        m = c.receive(timeout_s=10)
        time.sleep(busy_s)  # user code, busy: the behaviour under test
        m.ack()
        counts, end = [], time.monotonic() + 8
        while time.monotonic() < end:
            x = c.receive(timeout_s=0.5)
            if x is not None:
                counts.append(x.delivery_count)
                x.ack()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--busy-s", type=float, default=10.0)
    ap.add_argument("--max-processing-s", type=float, default=3.0)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    tries = []
    with stack(dispatch="shared") as (settings, _tracker, _broker):
        with kmq.Client(settings=settings) as client:
            for i in range(args.tries):
                counts = one_try(client, f"overrun-{i}-{int(time.time())}", args.busy_s, args.max_processing_s)
                tries.append(counts)
                print(f"try {i + 1}: deliveries after the overrun {counts}", flush=True)
    twice = sum(1 for t in tries if len(t) > 1)
    print(f"{twice} of {len(tries)} tries got the message more than once after the overrun")
    save(f"busy_overrun{'-' + args.label if args.label else ''}",
         {"command": f"python -m bench.busy_overrun --tries {args.tries} --busy-s {args.busy_s} "
                     f"--max-processing-s {args.max_processing_s}", "note": args.label,
          "tries": tries, "twice": twice})


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for every ``busy_overrun`` result file, oldest first."""
    files = sorted(((name, r) for name, r in results.items() if name.split("-")[0] == "busy_overrun"),
                   key=lambda item: item[1]["when"])
    if not files:
        return []
    out = ["## A busy consumer's overrun (`bench.busy_overrun`)", "",
           "One consumer (`max_in_flight=1`, visibility timeout 1 s) keeps user code busy past its",
           "`max_processing_s`; its message comes back meanwhile and is read in the background.",
           "Deliveries user code gets afterwards, per try: `[2]` is right, `[2, 3]` a copy that",
           "timed out before its first extension reached the tracker.", "",
           "| result file | command | when | deliveries per try | more than once |", "|---|---|---|---|---|"]
    for name, r in files:
        out.append(f"| {name} ({r.get('note', '')}) | `{r['command']}` | {r['when']} | {r['tries']} | "
                   f"{r['twice']} of {len(r['tries'])} |")
    return out + [""]


if __name__ == "__main__":
    main()

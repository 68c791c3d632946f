"""What reading dedup ids back after a tracker restart costs a shared queue's first message.

    python -m bench.dedup_replay [--history 200000] [--rounds 3] [--name NAME] [--note TEXT]

One queue partition holds ``--history`` records of a drained queue (100 B, acked); a
second queue on it got one message, acked. Each round restarts the tracker (stop, start:
the dispatcher BEGINs again) and times, from ``consumer()``, the first message of a send
made right then, on the small queue. Since 2026-11-27 the new dispatcher first reads the
partition's dedup ids back (agents/dispatch/dedup_replay.py, at most 200,000 offsets on
the embedded broker, whose offsets_for_times says the partition's start): this is what
that costs. Run it on the code before beside it for the baseline (a clone, same machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

import kmq
from bench.common import save, stack
from kmq.dev.devstack import TrackerProcess


def _drain(client, queue: str, n: int) -> None:
    got = 0
    with client.consumer(queue, max_in_flight=20_000, visibility_timeout_s=60) as c:
        deadline = time.monotonic() + 300
        while got < n and time.monotonic() < deadline:
            batch = c.receive_batch(10_000, 1.0)
            if batch:
                got += len(batch)
                batch.ack()
    if got < n:
        raise SystemExit(f"drained {got} of {n} in 300 s")


def _first_message_s(client, queue: str) -> float:
    with client.consumer(queue, max_in_flight=10, visibility_timeout_s=60) as c:
        began = time.monotonic()
        client.send(queue, b"probe")
        client.flush()
        deadline = began + 120
        while time.monotonic() < deadline:
            m = c.receive(0.05)
            if m is not None:
                m.ack()
                return time.monotonic() - began
    raise SystemExit("no first message in 120 s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--history", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default="")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    rounds: list[float] = []
    with stack(tracker=False, queue_partitions=1, markers_partitions=1, dispatch="shared") as (settings, _, _b):
        work = settings.data_dir
        t = TrackerProcess(settings, f"{work}-tracker-0.log").start(timeout_s=120)
        client = kmq.Client(settings=settings)
        try:
            client.send_batch("history", [b"x" * 100] * args.history)
            client.flush()
            _drain(client, "history", args.history)
            _first_message_s(client, "small")  # the small queue has a cursor too
            for i in range(args.rounds):
                t.stop()
                t = TrackerProcess(settings, f"{work}-tracker-{i + 1}.log").start(timeout_s=120)
                rounds.append(_first_message_s(client, "small"))
                print(f"round {i + 1}: first message after the restart {rounds[-1]:.3f} s", flush=True)
        finally:
            client.close()
            t.stop()
    name = "dedup_replay" + (f"-{args.name}" if args.name else "")
    save(name, {"command": f"python -m bench.dedup_replay --history {args.history} --rounds {args.rounds}",
                "note": args.note, "history": args.history, "first_message_s": rounds,
                "median_s": statistics.median(rounds)})
    print(f"median {statistics.median(rounds):.3f} s")


def section(results: dict[str, dict]) -> list[str]:
    runs = sorted((r for k, r in results.items() if k == "dedup_replay" or k.startswith("dedup_replay-")),
                  key=lambda r: r["when"])
    if not runs:
        return []
    out = ["## Dedup ids read back after a restart: a shared queue's first message", "",
           "From `consumer()` to the first message of a send made then, right after the tracker",
           "restarted, on a queue partition holding a drained queue's history (docs/ordering.md,",
           "\"Across a failover\"). Every run, oldest first; `" + runs[-1]["command"] + "`.", "",
           "| run | code | history records | first message s (rounds) | median s |", "|---|---|---|---|---|"]
    for r in runs:
        rounds = ", ".join(f"{x:.2f}" for x in r["first_message_s"])
        out.append(f"| {r['when']} | {r.get('note', '')} | {r['history']:,} | {rounds} | **{r['median_s']:.2f}** |")
    return out + [""]


if __name__ == "__main__":
    main()

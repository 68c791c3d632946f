"""Two busy shared consumers on one lane: what each reads there, with and without moves.

    python -m bench.lane_moves [--rate 2000] [--seconds 20] [--size 100] [--rounds 2]

Two queues alone on one queue partition, their sends interleaved, so neither dominates
a range and the dispatcher copies every message to its consumer's lane. One consumer
per queue (threads of this process), both started on the same lane, as two consumers
of a fleet that picked it at random; a sender writes ``--rate`` messages a second to
each queue for ``--seconds`` and each consumer takes them as they come (batch receive
and ack): long-lived consumers, where a shared lane costs for as long as they live.
Per consumer: its lane bytes (key + value, its own and the others'), over the bytes of
its messages delivered, how often it moved, how long the drain took. The arm without
moves is the same code with the judgement switched off (``MIN_OTHER_BYTES`` out of
reach); arms alternate. Results in bench/results/lane_moves.json and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import kmq
from bench.common import save, stack
from kmq.consumer import lane_choice, lanes

LANE = 7
DRAIN_S = 300.0


def drain(client, queue: str, expect: int, out: dict) -> None:
    got = delivered = 0
    t0 = time.monotonic()
    with client.consumer(queue, visibility_timeout_s=120, max_in_flight=20000) as c:
        while got < expect and time.monotonic() - t0 < DRAIN_S:
            batch = c.receive_batch(5000, 0.5)
            for m in batch:
                delivered += len(m.value) + len(queue) + sum(len(k) + len(v or b"") for k, v in m.headers.items())
            batch.ack()
            got += len(batch)
        own, others = c._source.lane_bytes()
        out.update(queue=queue, delivered=got, delivered_bytes=delivered, lane_own=own, lane_others=others,
                   lane_moves=c._source.lane_moves, drain_s=round(time.monotonic() - t0, 2),
                   lane_per_delivered=(own + others) / max(1, delivered))


def send_for(client, queues: list[str], rate: int, seconds: float, size: int) -> None:
    """``rate`` messages a second to each queue for ``seconds``, interleaved in batches of 50."""
    t0 = time.monotonic()
    sent = 0
    while sent < rate * seconds:
        due_s = t0 + sent / rate
        if (wait_s := due_s - time.monotonic()) > 0:
            time.sleep(wait_s)  # pacing the sender, not waiting for a condition
        for q in queues:  # interleaved: neither queue dominates a range
            client.send_batch(q, [os.urandom(size) for _ in range(50)])
        sent += 50
    client.flush(60)


def one_round(client, moves: bool, rate: int, seconds: float, size: int, tag: str) -> list[dict]:
    queues = [f"lanes-{tag}-a", f"lanes-{tag}-b"]
    for q in queues:
        client.configure_queue(q, dispatch="shared")
    messages = int(rate * seconds) // 50 * 50
    saved_min = lane_choice.MIN_OTHER_BYTES
    real_pick = lanes.pick_lane
    lanes.pick_lane = lambda count, avoid=(): LANE if not avoid else real_pick(count, avoid)
    if not moves:
        lane_choice.MIN_OTHER_BYTES = 1 << 62
    try:
        results = [{} for _ in queues]
        threads = [threading.Thread(target=drain, args=(client, q, messages, r), daemon=True)
                   for q, r in zip(queues, results)]
        for t in threads:
            t.start()
        send_for(client, queues, rate, seconds, size)
        for t in threads:
            t.join(DRAIN_S + 60)
    finally:
        lane_choice.MIN_OTHER_BYTES = saved_min
        lanes.pick_lane = real_pick
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=2000, help="messages a second per queue")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    runs: dict[str, list] = {"moves": [], "no_moves": []}
    with stack(queue_partitions=1, markers_partitions=1, dispatch="shared") as (settings, _t, _b):
        client = kmq.Client(settings=settings)
        for i in range(args.rounds):
            for arm in (("no_moves", "moves") if i % 2 == 0 else ("moves", "no_moves")):
                r = one_round(client, arm == "moves", args.rate, args.seconds, args.size, f"{arm}-{i}")
                runs[arm].append(r)
                print(f"{arm}: " + "; ".join(f"{x['lane_per_delivered']:.2f} (moves {x['lane_moves']}, "
                                             f"{x['delivered']} in {x['drain_s']} s)" for x in r), flush=True)
        client.close()
    summary = {arm: {"median_lane_per_delivered": statistics.median(x["lane_per_delivered"] for r in rs for x in r),
                     "median_drain_s": statistics.median(x["drain_s"] for r in rs for x in r)}
               for arm, rs in runs.items()}
    print(summary)
    print("saved", save("lane_moves", {
        "command": f"python -m bench.lane_moves --rate {args.rate} --seconds {args.seconds:g} --size {args.size} "
                   f"--rounds {args.rounds}",
        "rate": args.rate, "seconds": args.seconds, "size": args.size, "runs": runs, "summary": summary}))


if __name__ == "__main__":
    main()

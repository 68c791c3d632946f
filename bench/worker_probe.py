"""Where a busy worker loses time: no message ready (supply), or ready ones not yet handed out.

    python -m bench.worker_probe [--kinds sync,async] [--modes shared] [--concurrency 32]
                                 [--work-ms 20] [--runs 2] [--name worker_probe]

One handler runner in this process (kmq.worker.runner, as ``kmq worker`` runs it) drains a
backlog; every 10 ms a sample of its handlers running, the messages its consumer holds
ready and all it holds (``in_flight``). From 10% to 100% handled: the rate, the mean
running, the share of samples with 2+ slots idle and, among those, the share with nothing
ready. Idle slots with nothing ready mean the supply lags (for a shared queue: the credit
-> dispatcher -> delivery round trip through the tracker); idle slots with messages ready
mean the worker's own hand-out lags.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time

import kmq
from bench.common import save, stack
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal

SAMPLE_S = 0.01


def probe(settings, queue: str, mode: str, kind: str, concurrency: int, work_ms: float) -> dict:
    n = int(concurrency * 1000 / work_ms * 4)
    work_s = work_ms / 1000
    done = [0]
    if kind == "sync":
        def handle(msg: kmq.Message) -> None:
            time.sleep(work_s)
            done[0] += 1
    else:
        async def handle(msg: kmq.Message) -> None:
            await asyncio.sleep(work_s)
            done[0] += 1
    with kmq.Client(settings=settings) as client:
        client.configure_queue(queue, dispatch=mode)
        client.send_batch(queue, [b"x" * 100] * n)
        client.flush()
        shutdown = ShutdownSignal(5.0)
        runner = HandlerRunner(client, kmq.handler(queue, concurrency=concurrency)(handle), shutdown)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        load_1m = os.getloadavg()[0]
        samples = []
        deadline = time.monotonic() + 120
        while done[0] < n and time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
            c = runner.consumer
            if c is not None:
                ready = sum(len(h.recs) - h.handed for h in list(c._ready))
                samples.append((time.monotonic(), done[0], runner.running, ready, c.in_flight))
        shutdown.signal(time.monotonic())
        thread.join(60)
    s = [x for x in samples if x[1] >= n // 10]
    idle = [x for x in s if x[2] < concurrency - 1]
    return {"mode": mode, "kind": kind, "concurrency": concurrency, "messages": n,
            "msgs_s": round((s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])),
            "mean_running": round(statistics.mean(x[2] for x in s), 1),
            "idle_share": round(len(idle) / len(s), 2),
            "idle_nothing_ready_share": round(sum(1 for x in idle if x[3] == 0) / max(1, len(idle)), 2),
            "mean_ready": round(statistics.mean(x[3] for x in s)),
            "mean_in_flight": round(statistics.mean(x[4] for x in s)),
            "max_in_flight": concurrency + runner.handler.read_ahead, "load_1m": round(load_1m, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="sync,async")
    ap.add_argument("--modes", default="shared")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--work-ms", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--name", default="worker_probe")
    args = ap.parse_args()
    rows = []
    with stack(queue_partitions=8, markers_partitions=8, max_deliveries=5) as (settings, _tracker, _broker):
        for run in range(args.runs):
            for mode in args.modes.split(","):
                for kind in args.kinds.split(","):
                    row = probe(settings, f"probe-{run}-{mode}-{kind}", mode, kind, args.concurrency,
                                args.work_ms)
                    rows.append(row)
                    print(row, flush=True)
    print(save(args.name, {"command": "python -m bench.worker_probe " + " ".join(sys.argv[1:]),
                           "work_ms": args.work_ms, "rows": rows}))


if __name__ == "__main__":
    main()

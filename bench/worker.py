"""`kmq worker` throughput with an I/O-bound handler, and kmq.aio's send against the sync one.

    python -m bench.worker [--concurrency 1,8,32] [--work-ms 20] [--seconds 4] [--kinds sync,async]
                           [--modes shared,partition] [--send-messages 100000] [--runs 3]

- worker: per row, ``concurrency x 1000/work_ms x seconds`` messages are enqueued, then one
  ``kmq worker bench.worker_jobs --concurrency C`` process drains them; its /metrics
  (``--metrics-port``) is read every 50 ms. The rate is taken from 10% to 100% acked (the
  consumer's start and the shared queue's read-ahead growth left out). Goal:
  >= 0.8 x C x 1000/work_ms msgs/s.
- send: N 100-byte sends then a flush, ``kmq.Client.send`` in a loop against
  ``await kmq.aio.Client.send`` in a loop, alternating which goes first; goal ratio >= 0.8.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import kmq
import kmq.aio
from bench.common import median, save, stack
from kmq.dev.devstack import settings_env
from kmq.dev.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
ACKED = re.compile(r'kmq_worker_messages_total\{[^}]*outcome="acked"\} (\d+)')


def acked(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return sum(int(n) for n in ACKED.findall(r.read().decode()))
    except OSError:
        return 0


def worker_row(settings, queue: str, concurrency: int, work_ms: float, seconds: float, kind: str,
               mode: str) -> dict:
    with kmq.Client(settings=settings) as client:
        client.configure_queue(queue, dispatch=mode)
        n = max(50, int(concurrency * 1000 / work_ms * seconds))
        client.send_batch(queue, [b"x" * 100] * n)
        client.flush()
    port = free_port()
    env = {**os.environ, **settings_env(settings), "PYTHONPATH": str(ROOT), "BENCH_QUEUE": queue,
           "BENCH_WORK_MS": str(work_ms), "BENCH_ASYNC": "1" if kind == "async" else "0"}
    p = subprocess.Popen([sys.executable, "-m", "kmq.cli", "worker", "bench.worker_jobs",
                          "--concurrency", str(concurrency), "--metrics-port", str(port),
                          "--log-level", "warning"], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", "worker did not start"
        deadline = time.monotonic() + 60 + 3 * seconds
        t10 = None
        while True:
            done = acked(port)
            now = time.monotonic()
            if t10 is None and done >= n // 10:
                t10, done10 = now, done
            if done >= n:
                break
            if now > deadline:
                raise SystemExit(f"{queue}: {done}/{n} acked before the deadline")
            time.sleep(0.05)
        rate = (n - done10) / max(1e-6, now - t10)
    finally:
        p.terminate()
        p.wait(60)
    ideal = concurrency * 1000 / work_ms
    return {"messages": n, "msgs_s": round(rate), "ideal_msgs_s": round(ideal),
            "efficiency": round(rate / ideal, 3), "exit": p.returncode}


def sync_send(settings, queue: str, n: int) -> float:
    with kmq.Client(settings=settings) as client:
        client.send(queue, b"warm")
        client.flush()
        t0 = time.perf_counter()
        for _ in range(n):
            client.send(queue, b"x" * 100)
        client.flush()
        return n / (time.perf_counter() - t0)


def aio_send(settings, queue: str, n: int) -> float:
    async def main() -> float:
        async with kmq.aio.Client(settings=settings) as client:
            await client.send(queue, b"warm")
            await client.flush()
            t0 = time.perf_counter()
            for _ in range(n):
                await client.send(queue, b"x" * 100)
            await client.flush()
            return n / (time.perf_counter() - t0)
    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--work-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=4.0, help="ideal drain time per row")
    ap.add_argument("--kinds", default="sync,async")
    ap.add_argument("--modes", default="shared,partition")
    ap.add_argument("--send-messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    command = "python -m bench.worker " + " ".join(sys.argv[1:])
    rows = []
    sends = {"sync": [], "aio": [], "ratio": []}
    with stack(queue_partitions=8, markers_partitions=8, max_deliveries=5) as (settings, _tracker, _broker):
        for run in range(args.runs):
            order = [("sync", sync_send), ("aio", aio_send)]
            if run % 2:
                order.reverse()
            got = {name: fn(settings, f"send-{run}-{name}", args.send_messages) for name, fn in order}
            sends["sync"].append(round(got["sync"]))
            sends["aio"].append(round(got["aio"]))
            sends["ratio"].append(round(got["aio"] / got["sync"], 3))
            print(f"send run {run}: sync {got['sync']:.0f}/s aio {got['aio']:.0f}/s", flush=True)
        for mode in args.modes.split(","):
            for kind in args.kinds.split(","):
                for c in (int(x) for x in args.concurrency.split(",")):
                    row = worker_row(settings, f"w-{mode}-{kind}-{c}", c, args.work_ms, args.seconds,
                                     kind, mode)
                    row.update(mode=mode, kind=kind, concurrency=c)
                    rows.append(row)
                    print(row, flush=True)
    out = {"command": command, "work_ms": args.work_ms, "rows": rows,
           "send": {k: {"runs": v, "median": median(v)} for k, v in sends.items()}}
    print(save("worker", out))


if __name__ == "__main__":
    main()

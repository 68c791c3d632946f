"""`kmq worker` throughput with an I/O-bound handler, and kmq.aio's send against the sync one.

    python -m bench.worker [--concurrency 1,8,32] [--work-ms 20] [--seconds 4] [--kinds sync,async]
                           [--modes shared,partition] [--send-messages 100000] [--runs 3]
                           [--name worker]

- worker: per row, ``concurrency x 1000/work_ms x seconds`` messages are enqueued, then one
  ``kmq worker bench.worker_jobs --concurrency C`` process drains them; its /metrics
  (``--metrics-port``) is read every 50 ms. The rate is taken from 10% to 100% acked (the
  consumer's start and the shared queue's read-ahead growth left out). Every row is run
  ``--runs`` times, the runs interleaved (run 1 of every row, then run 2, ...) so a busy
  moment of the shared machine does not fall on one row only; every run is kept, the
  median is the figure. Goal: >= 0.8 x C x 1000/work_ms msgs/s.
- send: N 100-byte sends then a flush, ``kmq.Client.send`` in a loop against
  ``await kmq.aio.Client.send`` in a loop, in 10 alternating chunks within one process (a
  busy moment of the shared machine falls on both); goal ratio >= 0.8. Then, for
  information, ``await send_and_wait`` from 100 concurrent tasks (each awaits its own
  delivery report).
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


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_row(settings, queue: str, concurrency: int, work_ms: float, seconds: float, kind: str,
               mode: str, tracker_pid: int) -> dict:
    load_1m = os.getloadavg()[0]  # the machine is shared: how busy it was, kept with the rate
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
                t10, done10, cpu10, tracker10 = now, done, cpu_s(p.pid), cpu_s(tracker_pid)
            if done >= n:
                break
            if now > deadline:
                raise SystemExit(f"{queue}: {done}/{n} acked before the deadline")
            time.sleep(0.05)
        rate = (n - done10) / max(1e-6, now - t10)
        # The worker's own CPU per message: what a busy shared machine takes away from it.
        cpu_ms_per_msg = (cpu_s(p.pid) - cpu10) * 1000 / max(1, n - done10)
        # And the tracker's (a shared queue's dispatcher is in it: each message's round trip).
        tracker_ms_per_msg = (cpu_s(tracker_pid) - tracker10) * 1000 / max(1, n - done10)
    finally:
        p.terminate()
        p.wait(60)
    ideal = concurrency * 1000 / work_ms
    return {"messages": n, "msgs_s": round(rate), "ideal_msgs_s": round(ideal),
            "efficiency": round(rate / ideal, 3), "exit": p.returncode, "load_1m": round(load_1m, 2),
            "cpu_ms_per_msg": round(cpu_ms_per_msg, 3), "tracker_cpu_ms_per_msg": round(tracker_ms_per_msg, 3)}


SEND_CHUNKS = 10  # one comparison: this many alternating chunks of each client


def send_compare(settings, queue: str, n: int) -> dict:
    """Seconds for ``n`` sends (+ flush) by each client, in ``SEND_CHUNKS`` alternating chunks
    (sync, aio, aio, sync, ...) within one process: a busy moment of the shared machine
    falls on both clients, not on one whole side of the comparison. Then, for information,
    ``send_and_wait`` from 100 concurrent tasks."""
    chunk = max(1, n // SEND_CHUNKS)

    async def main() -> dict:
        took = {"sync": 0.0, "aio": 0.0}
        with kmq.Client(settings=settings) as sync:
            async with kmq.aio.Client(settings=settings) as aio:
                sync.send(queue, b"warm")
                sync.flush()
                await aio.send(queue, b"warm")
                await aio.flush()
                for i in range(SEND_CHUNKS):
                    for name in (("sync", "aio") if i % 2 == 0 else ("aio", "sync")):
                        t0 = time.perf_counter()
                        if name == "sync":
                            for _ in range(chunk):
                                sync.send(queue, b"x" * 100)
                            sync.flush()
                        else:
                            for _ in range(chunk):
                                await aio.send(queue, b"x" * 100)
                            await aio.flush()
                        took[name] += time.perf_counter() - t0
                waited = n // 10
                t0 = time.perf_counter()
                for _ in range(waited // 100):
                    await asyncio.gather(*(aio.send_and_wait(queue, b"x" * 100) for _ in range(100)))
                and_wait = waited / (time.perf_counter() - t0)
        total = chunk * SEND_CHUNKS
        return {"sync": total / took["sync"], "aio": total / took["aio"], "and_wait": and_wait}
    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--work-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=4.0, help="ideal drain time per row")
    ap.add_argument("--kinds", default="sync,async")
    ap.add_argument("--modes", default="shared,partition")
    ap.add_argument("--send-messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3, help="of every row and of the send comparison")
    ap.add_argument("--name", default="worker", help="bench/results/NAME.json")
    args = ap.parse_args()
    command = "python -m bench.worker " + " ".join(sys.argv[1:])
    rows = []
    sends = {"sync": [], "aio": [], "ratio": [], "aio_send_and_wait": []}
    with stack(queue_partitions=8, markers_partitions=8, max_deliveries=5) as (settings, tracker, _broker):
        for run in range(args.runs):
            got = send_compare(settings, f"send-{run}", args.send_messages)
            sends["sync"].append(round(got["sync"]))
            sends["aio"].append(round(got["aio"]))
            sends["ratio"].append(round(got["aio"] / got["sync"], 3))
            sends["aio_send_and_wait"].append(round(got["and_wait"]))
            print(f"send run {run}: sync {got['sync']:.0f}/s aio {got['aio']:.0f}/s "
                  f"send_and_wait x100 {got['and_wait']:.0f}/s", flush=True)
        grid = [(mode, kind, int(c)) for mode in args.modes.split(",") for kind in args.kinds.split(",")
                for c in args.concurrency.split(",")]
        runs: dict[tuple, list[dict]] = {key: [] for key in grid}
        for run in range(args.runs):
            for mode, kind, c in grid:
                one = worker_row(settings, f"w-{run}-{mode}-{kind}-{c}", c, args.work_ms, args.seconds,
                                 kind, mode, tracker.process.pid)
                runs[(mode, kind, c)].append(one)
                print(run, mode, kind, c, one, flush=True)
        for (mode, kind, c), got in runs.items():
            rates = [one["msgs_s"] for one in got]
            ideal = got[0]["ideal_msgs_s"]
            rows.append({"mode": mode, "kind": kind, "concurrency": c, "messages": got[0]["messages"],
                         "msgs_s": round(median(rates)), "runs": rates, "ideal_msgs_s": ideal,
                         "efficiency": round(median(rates) / ideal, 3),
                         "exits": [one["exit"] for one in got],
                         "load_1m": [one["load_1m"] for one in got],
                         "cpu_ms_per_msg": round(median([one["cpu_ms_per_msg"] for one in got]), 3),
                         "tracker_cpu_ms_per_msg": round(median([one["tracker_cpu_ms_per_msg"]
                                                                 for one in got]), 3)})
    out = {"command": command, "work_ms": args.work_ms, "rows": rows,
           "send": {k: {"runs": v, "median": median(v)} for k, v in sends.items()}}
    print(save(args.name, out))


if __name__ == "__main__":
    main()

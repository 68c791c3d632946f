"""Where a shared queue's drain spends its time: py-spy on the tracker and the consumers.

    python -m bench.shared_profile [--messages 300000] [--size 100] [--consumers 4] [--out DIR]
                                   [--native] [--idle | --gil] [--tracker-only] [--mode shared|partition]

The throughput benchmark's drain (bench.shared throughput: 4 consumer processes, batch
receive and ack, no work), with ``py-spy record`` (raw collapsed stacks, every thread)
attached to the tracker worker and to each consumer for as long as the drain lasts.
Writes ``DIR/tracker.txt``, ``DIR/consumer-N.txt`` and a summary of the CPU each
process spent per message between the first ack and the last (sampled every 20 ms), and
each of the tracker's threads in that time (``tracker_threads_us_per_msg``, bench.thread_cpu).
``--gil`` samples only the thread holding the GIL (who keeps the others waiting).
Needs py-spy in the venv (``pip install py-spy``) and ptrace rights.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

import psutil

import kmq
from bench.common import stack
from bench.shared import Fleet, wait_handover
from bench.shared_cpu import CpuSampler
from bench.thread_cpu import by_name, py_spy_names, thread_cpu_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--mode", default="shared", choices=("shared", "partition"))
    ap.add_argument("--out", default="/tmp/kmq-profile")
    ap.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    ap.add_argument("--no-spy", action="store_true", help="only the CPU figures")
    ap.add_argument("--idle", action="store_true", help="py-spy --idle (waits too: where wall time goes)")
    ap.add_argument("--tracker-only", action="store_true", help="py-spy on the tracker only")
    ap.add_argument("--gil", action="store_true", help="py-spy --gil (only the thread holding the GIL: who keeps "
                    "the others waiting)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spy = str(Path(os.sys.executable).parent / "py-spy")
    with stack(deliveries_partitions=16, dispatch="shared") as (settings, tracker, broker):
        client = kmq.Client(settings=settings)
        queue = f"prof-{args.mode}-{args.size}"
        if args.mode == "partition":
            client.configure_queue(queue, dispatch="partition")
            wait_handover(client, queue)
        client.send_batch(queue, [b"x" * args.size] * args.messages)
        client.flush(300)
        n = args.consumers if args.mode == "shared" else 1
        fleet = Fleet(settings, queue, n, 0, max_in_flight=20000, batch=True)
        spies = []
        try:
            procs = {"tracker": [psutil.Process(tracker.process.pid)],
                     "broker": [psutil.Process(broker.process.pid)],
                     "consumers": [psutil.Process(p.pid) for p in fleet.procs]}
            sampler = CpuSampler(procs)
            if not args.no_spy:
                targets = [("tracker", tracker.process.pid)] + ([] if args.tracker_only else [
                    (f"consumer-{i}", p.pid) for i, p in enumerate(fleet.procs)])
                for name, pid in targets:
                    cmd = [spy, "record", "--pid", str(pid), "--format", "raw", "--threads", "--rate", "200",
                           "--nonblocking", "-o", str(out / f"{name}.txt")] + (["--native"] if args.native else []) + (
                        ["--idle"] if args.idle else []) + (["--gil"] if args.gil else [])
                    spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            # The tracker's threads from the first ack to the last (bench.thread_cpu).
            fleet.wait(lambda: any(fleet.first_at), 600, "a first ack")
            threads_before = thread_cpu_s(tracker.process.pid)
            fleet.wait(lambda: sum(fleet.acked) >= args.messages, 600, "drained")
            threads_after = thread_cpu_s(tracker.process.pid)
            sampler.stop()
            first = min(f for f in fleet.first_at if f)
            last = max(fleet.last_at)
            cpu = sampler.between(first, last)
            summary = {"mode": args.mode, "messages": args.messages, "size": args.size,
                       "msgs_s": round(args.messages / (last - first)), "seconds": round(last - first, 3),
                       "cpu_us_per_msg": {k: round(v / args.messages * 1e6, 2) for k, v in cpu.items()},
                       "cpu_cores": {k: round(v / (last - first), 2) for k, v in cpu.items()},
                       "per_consumer": fleet.acked,
                       "tracker_threads_us_per_msg": {
                           name: round(v / args.messages * 1e6, 2) for name, v in sorted(
                               by_name(threads_before, threads_after, py_spy_names(spy, tracker.process.pid)).items(),
                               key=lambda kv: -kv[1]) if v >= 0.005}}
            print(json.dumps(summary), flush=True)
            (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        finally:
            for s in spies:
                s.send_signal(2)  # SIGINT: py-spy writes what it sampled
            for s in spies:
                try:
                    s.wait(30)
                except subprocess.TimeoutExpired:
                    s.kill()
            fleet.stop()
            shutil.copy(tracker.log_path, out / "tracker.log")  # KMQ_DISPATCH_TRACE=1: the dispatcher's steps


if __name__ == "__main__":
    main()

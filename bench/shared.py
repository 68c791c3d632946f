"""Shared queues against partition-owned ones: scaling, throughput, latency, first message.

    python -m bench.shared scaling [--counts 1,2,4,8,16,32] [--work-ms 20] [--runs 1]
    python -m bench.shared throughput [--messages 100000] [--sizes 100,1024] [--runs 3]
    python -m bench.shared latency [--seconds 10] [--flood 300000] [--flood-in-process] [--worst N]
    python -m bench.shared first [--tries 20]

- scaling: N consumer processes of ONE queue (spread 1), each handling one message at a
  time with ``--work-ms`` of work; drain rate of a backlog sent once all are ready, in
  both modes (partition mode up to 8 processes: only one of them gets the partition).
- throughput: no work; 4 shared consumer processes against one partition-owned consumer,
  the same number of records, alternating who goes first; each queue alone on a partition
  of its own (16 queue partitions), so neither reads another queue's records first.
- latency: send -> receive of a message every 20 ms, idle and while another tenant
  floods its own queue on the same partition (``--flood`` messages at once, sent by a
  process of its own and drained by another; ``--flood-in-process``: by threads of the
  probe's process, as measured before 2026-11-25 23:00, where the flood's Python work
  held the probe's GIL).
- first: time from calling ``client.consumer()`` to the first message, per mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil

import kmq
from bench.common import PAYLOADS, median, payloads, save, stack
from bench.shared_cpu import CpuSampler, cpu_s
from kmq.dev.devstack import settings_env
from kmq.dev.processes import terminate
from kmq.protocol.placement import queue_partitions

ROOT = Path(__file__).resolve().parents[1]
CONSUMER = Path(__file__).parent / "shared_consumer.py"


# -- scaling -----------------------------------------------------------------------------


def wait_handover(client, queue: str, timeout_s: float = 30.0) -> None:
    """A queue switched to partition mode: wait until the tracker has handed it over."""
    deadline = time.monotonic() + timeout_s
    while client.queue_config(queue).handover_pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no handover of {queue} within {timeout_s:g} s")
        time.sleep(0.05)


class Fleet:
    """N consumer processes of one queue, reading their progress lines."""

    def __init__(self, settings, queue: str, n: int, work_ms: float, max_in_flight: int,
                 batch: bool = False) -> None:
        env = {**os.environ, **settings_env(settings), "PYTHONPATH": str(ROOT)}
        extra = ["batch"] if batch else []
        self.procs = [subprocess.Popen([sys.executable, str(CONSUMER), queue, str(work_ms), str(max_in_flight),
                                        *extra],
                                       env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
                      for _ in range(n)]
        self.acked = [0] * n
        self.last_at = [0.0] * n
        self.first_at = [0.0] * n
        self.shares: list[list[int]] = [[] for _ in range(n)]
        self.ready = [False] * n
        self._threads = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def _read(self, i: int) -> None:
        for line in self.procs[i].stdout:
            d = json.loads(line)
            if d.get("ready"):
                self.ready[i] = True
            if "acked" in d:
                self.acked[i], self.last_at[i] = d["acked"], d["at"]
                self.first_at[i] = d.get("first", 0.0)
            if "share" in d:
                self.shares[i] = d["share"]

    def wait(self, cond, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not within {timeout_s:g} s")
            time.sleep(0.05)

    def stop(self) -> None:
        for p in self.procs:
            terminate(p, grace_s=10)


def consumers_known(tracker, queue: str) -> int:
    """How many live consumers of ``queue`` the tracker's dispatcher knows."""
    with urllib.request.urlopen(tracker.url + "/kmq/stats", timeout=5) as r:
        return json.loads(r.read())["dispatcher"]["consumers"].get(queue, 0)


def scaling_run(settings, tracker, broker, client, mode: str, n: int, messages: int, work_ms: float,
                tag: str) -> dict:
    queue = f"scale-{mode}-{n}-{tag}"
    if mode != settings.dispatch:
        client.configure_queue(queue, dispatch=mode)
        wait_handover(client, queue)
    fleet = Fleet(settings, queue, n, work_ms, max_in_flight=1000)
    try:
        fleet.wait(lambda: all(fleet.ready), 120, "consumers ready")
        if mode == "partition":  # the group has settled: its shares cover the topic
            parts = settings.queue_partitions
            fleet.wait(lambda: sorted(p for s in fleet.shares for p in s) == list(range(parts)), 60,
                       "the group's assignment")
        else:  # every consumer has asked the dispatcher for work
            fleet.wait(lambda: consumers_known(tracker, queue) == n, 60, "the consumers' credits")
        procs = {"tracker": [psutil.Process(tracker.process.pid)], "broker": [psutil.Process(broker.process.pid)],
                 "consumers": [psutil.Process(p.pid) for p in fleet.procs]}
        before = {k: cpu_s(v) for k, v in procs.items()}
        t0 = time.time()
        client.send_batch(queue, [b"x" * 100] * messages)
        client.flush()
        fleet.wait(lambda: sum(fleet.acked) >= messages, 600, "the backlog drained")
        elapsed = max(fleet.last_at) - t0
        cpu = {k: round((cpu_s(v) - before[k]) / elapsed, 2) for k, v in procs.items()}
        busy = sum(1 for a in fleet.acked if a)
        return {"n": n, "messages": messages, "seconds": round(elapsed, 3),
                "msgs_s": round(messages / elapsed, 1), "consumers_with_work": busy,
                "cpu_cores": cpu, "per_consumer": fleet.acked}
    finally:
        fleet.stop()


def scaling(args) -> None:
    counts = [int(x) for x in args.counts.split(",")]
    results: dict = {"shared": [], "partition": []}
    with stack(dispatch="shared") as (settings, tracker, broker):  # the default lanes (256)
        client = kmq.Client(settings=settings)
        for run in range(args.runs):
            for mode in ("shared", "partition"):
                for n in counts:
                    if mode == "partition" and n > 8:
                        continue
                    # About args.seconds of work at the ideal rate (N x 1000/work_ms), at least 300.
                    ideal = n * 1000 / max(args.work_ms, 1) if mode == "shared" else 1000 / max(args.work_ms, 1)
                    messages = max(300, int(ideal * args.seconds))
                    row = scaling_run(settings, tracker, broker, client, mode, n, messages, args.work_ms, f"{run}")
                    results[mode].append(row)
                    print(f"{mode:9s} N={n:2d}: {row['msgs_s']:7.1f} msgs/s ({row['messages']} in "
                          f"{row['seconds']:.1f} s, {row['consumers_with_work']} of {n} got work; "
                          f"cpu cores {row['cpu_cores']})", flush=True)
    for mode, rows in results.items():
        ones = [r["msgs_s"] for r in rows if r["n"] == 1]
        if not ones:
            continue
        base = statistics.median(ones)
        for r in rows:
            r["speedup"] = round(r["msgs_s"] / base, 2)
            r["efficiency"] = round(r["msgs_s"] / (base * r["n"]), 2)
    path = save("shared_scaling" + (f"-{args.name}" if args.name else ""),
                {"command": "python -m bench.shared scaling " + _argv(args), "work_ms": args.work_ms,
                 "results": results, **({"note": args.note} if args.note else {})})
    print(f"saved {path}")


# -- throughput ----------------------------------------------------------------------------


def drain(settings, tracker, broker, queue: str, n: int, consumers: int) -> tuple[float, dict]:
    """Receive and ack n messages with ``consumers`` consumer processes (batch receive and
    batch ack, no work); msgs/s from the first ack to the last (group joins not timed), and
    the CPU microseconds per message each side spent over that same window."""
    fleet = Fleet(settings, queue, consumers, 0, max_in_flight=20000, batch=True)
    try:
        procs = {"tracker": [psutil.Process(tracker.process.pid)], "broker": [psutil.Process(broker.process.pid)],
                 "consumers": [psutil.Process(p.pid) for p in fleet.procs]}
        sampler = CpuSampler(procs)
        fleet.wait(lambda: sum(fleet.acked) >= n, 600, f"{n} acked")
        sampler.stop()
        first, last = min(f for f in fleet.first_at if f), max(fleet.last_at)
        cpu_us = {k: round(v / n * 1e6, 2) for k, v in sampler.between(first, last).items()}
        return n / (last - first), cpu_us
    finally:
        fleet.stop()


def fresh_queue(prefix: str, partitions: int, used: set[int]) -> str:
    """A queue name whose (spread-1) partition no earlier queue of the run used, if any is
    left: each queue alone in what is read, no earlier run's records before its own."""
    best, i = None, 0
    while i < 10_000:
        name = f"{prefix}-{i}"
        p = queue_partitions(name, partitions)[0]
        if p not in used:
            used.add(p)
            return name
        best = best or name
        i += 1
    return best


def throughput(args) -> None:
    results = {}
    cpu: dict[str, list] = {}
    # A partition per queue: 2 modes x runs x sizes of them (more runs reuse partitions).
    with stack(deliveries_partitions=16, dispatch="shared", queue_partitions=16,
               compression=args.compression) as (settings, tracker, broker):
        client = kmq.Client(settings=settings)
        used: set[int] = set()
        for size in [int(s) for s in args.sizes.split(",")]:
            rows: dict[str, list] = {"partition_1_msgs_s": [], "shared_4_msgs_s": [], "ratio": []}
            cpu[str(size)] = []
            for run in range(args.runs):
                queues = {m: fresh_queue(f"tp-{m}-{size}-{run}", settings.queue_partitions, used)
                          for m in ("partition", "shared")}
                client.configure_queue(queues["partition"], dispatch="partition")
                wait_handover(client, queues["partition"])
                for mode, q in queues.items():
                    client.send_batch(q, payloads(args.payload, size, args.messages))
                client.flush(300)
                order = ["partition", "shared"] if run % 2 == 0 else ["shared", "partition"]
                for mode in order:
                    rate, cpu_us = drain(settings, tracker, broker, queues[mode], args.messages,
                                         1 if mode == "partition" else 4)
                    rows["partition_1_msgs_s" if mode == "partition" else "shared_4_msgs_s"].append(rate)
                    cpu[str(size)].append({"mode": mode, "run": run, "cpu_us_per_msg": cpu_us})
                    print(f"  {mode}: cpu us/msg {cpu_us}", flush=True)
                rows["ratio"].append(rows["shared_4_msgs_s"][-1] / rows["partition_1_msgs_s"][-1])
                print(f"{size} B run {run}: partition x1 {rows['partition_1_msgs_s'][-1]:,.0f}/s  "
                      f"shared x4 {rows['shared_4_msgs_s'][-1]:,.0f}/s  ratio {rows['ratio'][-1]:.2f}",
                      flush=True)
            results[str(size)] = {k: {"runs": [round(x, 3) for x in v], "median": round(median(v), 3)}
                                  for k, v in rows.items()}
    path = save("shared_throughput" + (f"-{args.name}" if args.name else ""),
                {"command": "python -m bench.shared throughput " + _argv(args), "results": results,
                 "cpu": cpu, **({"note": args.note} if args.note else {})})
    print(f"saved {path}")


# -- first message --------------------------------------------------------------------------


def first(args) -> None:
    results = {}
    with stack(deliveries_partitions=16, dispatch="shared") as (settings, _tracker, _broker):
        client = kmq.Client(settings=settings)
        for mode in ("shared", "partition"):
            times = []
            for i in range(args.tries):
                q = f"first-{mode}-{i}"
                if mode == "partition":
                    client.configure_queue(q, dispatch=mode)
                    wait_handover(client, q)
                client.send(q, b"hello")
                client.flush()
                t0 = time.monotonic()  # from asking for a consumer, construction included
                with client.consumer(q, visibility_timeout_s=30) as c:
                    m = None
                    while m is None and time.monotonic() - t0 < 60:
                        m = c.receive(0.05)
                    times.append(time.monotonic() - t0)
                    m.ack()
            results[mode] = {"tries": args.tries, "p50_s": round(statistics.median(times), 3),
                             "p99_s": round(sorted(times)[min(len(times) - 1, int(0.99 * len(times)))], 3),
                             "max_s": round(max(times), 3)}
            print(mode, results[mode], flush=True)
    path = save("shared_first_message" + (f"-{args.name}" if args.name else ""),
                {"command": "python -m bench.shared first " + _argv(args), "results": results,
                 **({"note": args.note} if args.note else {})})
    print(f"saved {path}")


def _argv(args) -> str:
    return " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in vars(args).items()
                    if k not in ("func", "name", "note") and v != "" and v is not False and v is not None)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(required=True)
    p = sub.add_parser("scaling")
    p.add_argument("--counts", default="1,2,4,8,16,32")
    p.add_argument("--work-ms", type=float, default=20.0)
    p.add_argument("--seconds", type=float, default=3.0, help="ideal drain time per row")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--name", default="", help="save as shared_scaling-NAME")
    p.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    p.set_defaults(func=scaling)
    p = sub.add_parser("throughput")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--sizes", default="100,1024")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--payload", choices=PAYLOADS, default=None,
                   help="payload bytes: one repeated byte (the default) or random, each message its own")
    p.add_argument("--compression", default="",
                   help="KMQ_COMPRESSION of the SDK's and tracker's producers (default: the profile's, none)")
    p.add_argument("--name", default="", help="save as shared_throughput-NAME")
    p.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    p.set_defaults(func=throughput)
    p = sub.add_parser("latency")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--flood", type=int, default=300_000)
    p.add_argument("--worst", type=int, default=0, help="print the N longest under the flood, and when sent")
    p.add_argument("--flood-in-process", action="store_true",
                   help="send and drain the flood in this process, as the first measurements did")
    p.add_argument("--name", default="", help="save as shared_latency-NAME (an earlier code's run)")
    p.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    from bench.shared_latency import latency  # it imports this module's Fleet
    p.set_defaults(func=latency)
    p = sub.add_parser("first")
    p.add_argument("--tries", type=int, default=20)
    p.add_argument("--name", default="", help="save as shared_first_message-NAME")
    p.add_argument("--note", default="", help="what code this run measured (BENCHMARKS.md shows it)")
    p.set_defaults(func=first)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()

"""Tracker scale: memory, tick cost and recovery time as in-flight messages grow.

For each size N (messages in flight) and range size R (messages per fetched
range; R=1 is the worst case: a table entry per message), on a fresh broker
and tracker:

1. load: START markers for N messages in ranges of R, 1,000 STARTs per marker
   record, with an hour's visibility (as consumers that hold them would write),
   plus 1,000 real messages with a 3 s visibility: those come due together;
2. memory: the tracker process's RSS once all N are in flight;
3. tick cost: the tracker's own measure of the tick that redelivered the 1,000
   (seconds from reading the index to forgetting, including reading payloads
   back and republishing);
4. recovery: SIGKILL the worker, start a fresh one with an empty data dir;
   seconds until it is ready with all N in flight again.

    python -m bench.tracker_scale [--sizes 10000,100000,1000000] [--range-sizes 100,1]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path

import psutil
from confluent_kafka import Producer

from bench.common import save, stack
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.dev.devstack import TrackerProcess
from kmq.protocol.placement import markers_partition, queue_partitions

DUE = 1000


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def _pending(url: str) -> int:
    return sum(p["pending"] for p in _get(url + "/kmq/debug/state").values())


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise TimeoutError(f"{what} not within {timeout_s}s")


# A recovery slower than this is recorded as not done (the embedded broker's fetches
# slow down as an in-memory partition grows: one took 39 s at offset ~40k).
RECOVERY_LIMIT_S = 600


def run_one(n: int, range_size: int) -> dict:
    with stack(markers_partitions=8, dispatch="partition") as (settings, tracker, _broker):
        raw = Producer({**settings.client_config(), "linger.ms": 20, "batch.num.messages": 1000})
        # N held messages over many queues' ranges (offsets need not exist: never due).
        queues = [f"held{i}" for i in range(64)]
        t0 = time.perf_counter()
        per_queue = n // len(queues)
        for q in queues:
            mp = markers_partition(q, settings.markers_partitions)
            starts = [M.Start(M.RangeRef(q, 0, o, o + range_size), 3_600_000,
                              (1 << range_size) - 1) for o in range(0, per_queue, range_size)]
            for i in range(0, len(starts), 1000):
                raw.produce(settings.markers_topic, marker_codec.encode(starts[i:i + 1000]), q.encode(), partition=mp)
                raw.poll(0)
        # DUE real messages with a short visibility, in ranges of the same size.
        due_q = "due"
        p = queue_partitions(due_q, settings.queue_partitions)[0]
        for _ in range(DUE):
            raw.produce(settings.queue_topic, b"x" * 100, due_q.encode(), partition=p)
        raw.flush(120)
        total = per_queue * len(queues)
        _wait(lambda: _pending(tracker.url) >= total, 1800, f"{total} in flight")
        load_s = time.perf_counter() - t0
        rss_mb = psutil.Process(tracker.process.pid).memory_info().rss / 2**20
        mp = markers_partition(due_q, settings.markers_partitions)
        starts = [M.Start(M.RangeRef(due_q, p, o, o + range_size), 3000, (1 << range_size) - 1)
                  for o in range(0, DUE, range_size)]
        for i in range(0, len(starts), 1000):
            raw.produce(settings.markers_topic, marker_codec.encode(starts[i:i + 1000]), due_q.encode(), partition=mp)
        raw.flush(60)
        ticks = _wait(lambda: [t for t in _get(tracker.url + "/kmq/debug/ticks")[str(mp)]
                               if t[0] >= DUE] or None, 120, "the tick of the due messages")
        tick_s = ticks[0][1]
        # Recovery: a fresh worker, empty data dir, same app id.
        tracker.kill()
        fresh = tracker.settings.replace(data_dir=str(Path(tracker.settings.data_dir).parent / "fresh"))
        t1 = time.perf_counter()
        second = TrackerProcess(fresh, Path(fresh.data_dir).parent / "tracker-fresh.log").start(
            timeout_s=1800)
        recovery_s = rss2 = None
        failure = None
        try:
            _wait(lambda: _pending(second.url) >= total, RECOVERY_LIMIT_S, "recovered state")
            recovery_s = time.perf_counter() - t1
            rss2 = psutil.Process(second.process.pid).memory_info().rss / 2**20
        except TimeoutError as exc:
            failure = str(exc)  # reported as a row, so one stuck size does not lose the others
        finally:
            second.stop()
    row = {"in_flight": total, "range_size": range_size, "entries": total // range_size,
           "load_s": load_s, "rss_mb": rss_mb, "rss_mb_after_recovery": rss2,
           "tick_s_for_1000_due": tick_s, "recovery_s": recovery_s}
    return {**row, "failure": failure} if failure else row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--range-sizes", default="100,1")
    ap.add_argument("--max-entries", type=int, default=1_000_000)
    args = ap.parse_args()
    rows = []
    for r in [int(x) for x in args.range_sizes.split(",")]:
        for n in [int(x) for x in args.sizes.split(",")]:
            if n // r > args.max_entries:
                continue
            row = run_one(n, r)
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
                  flush=True)
            # Saved after every row: the large sizes take long and a partial curve still counts.
            path = save("tracker_scale", {"command": "python -m bench.tracker_scale " + " ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()), "rows": rows})
            print(f"saved {path}")


if __name__ == "__main__":
    main()

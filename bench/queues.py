"""Many logical queues on one set of topics: 10, 1k, 10k queues.

For each count Q (one fresh embedded broker + tracker each):
- send: N messages spread round-robin over Q queues (``send_batch`` per queue);
- tracker: every queue gets an in-flight range (a synthetic START marker, as a
  consumer that fetched and holds them would write), then the tracker's RSS
  is read, and the time the JSON list view takes (first page of 100 rows,
  sorted by name; the median of 5 requests);
- idle: with nothing due, the tracker's CPU over 10 s (an idle queue costs nothing);
- one queue's view (routed to its owner): the median of 5 requests;
- read amplification: records fetched per record delivered for one queue's
  consumer on the 16-partition queue topic (= queues sharing its partition).

    python -m bench.queues [--counts 10,1000,10000] [--messages 100000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request

import psutil
from confluent_kafka import Producer

import kmq
from bench.common import save, stack
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition, queue_partitions


def run_one(q_count: int, messages: int) -> dict:
    with stack(queue_partitions=16, markers_partitions=8, dispatch="partition") as (settings, tracker, _broker):
        client = kmq.Client(settings=settings)
        queues = [f"q{i:05d}" for i in range(q_count)]
        per = max(1, messages // q_count)
        t0 = time.perf_counter()
        for q in queues:
            client.send_batch(q, [b"x" * 100] * per)
        client.flush(300)
        send_rate = per * q_count / (time.perf_counter() - t0)
        proc = psutil.Process(tracker.process.pid)
        rss_before = proc.memory_info().rss
        # Every queue gets one in-flight range of its first `per` offsets.
        raw = Producer(settings.client_config())
        for q in queues:
            p = queue_partitions(q, 16)[0]
            r = M.RangeRef(q, p, 0, per)  # offsets need not be this queue's: the tracker only tracks
            raw.produce(settings.markers_topic, marker_codec.encode([M.Start(r, 3_600_000, r.full_mask)]), q.encode(),
                        partition=markers_partition(q, settings.markers_partitions))
            raw.poll(0)
        raw.flush(60)
        _wait_in_flight(tracker.url, q_count * per)
        rss_after = proc.memory_info().rss
        # Idle first (before any view asks the tracker to scan queue depths).
        cpu0 = sum(proc.cpu_times()[:2])
        time.sleep(10)  # measuring idle cost: nothing to wait for
        idle_cpu = (sum(proc.cpu_times()[:2]) - cpu0) / 10
        detail_ms = []
        for q in queues[:: max(1, q_count // 5)][:5]:
            t = time.perf_counter()
            with urllib.request.urlopen(f"{tracker.url}/kmq/api/queues/{q}", timeout=60) as resp:
                resp.read()
            detail_ms.append((time.perf_counter() - t) * 1000)
        list_ms = []
        for _ in range(5):
            t = time.perf_counter()
            with urllib.request.urlopen(tracker.url + "/kmq/api/queues?limit=100", timeout=60) as resp:
                body = json.loads(resp.read())
            list_ms.append((time.perf_counter() - t) * 1000)
        sharing: dict[int, int] = {}
        for q in queues:
            sharing[queue_partitions(q, 16)[0]] = sharing.get(queue_partitions(q, 16)[0], 0) + 1
        amps = sorted(sharing[queue_partitions(q, 16)[0]] for q in queues)
        return {
            "queues": q_count, "messages": per * q_count, "send_msgs_s": send_rate,
            "tracker_rss_mb_before": rss_before / 2**20, "tracker_rss_mb_with_all_in_flight": rss_after / 2**20,
            "list_view_ms_median": statistics.median(list_ms), "list_total": body.get("total"),
            "queue_view_ms_median": statistics.median(detail_ms),
            "idle_tracker_cpu_share": idle_cpu,
            "amplification_median": statistics.median(amps), "amplification_max": amps[-1],
        }


def _wait_in_flight(url: str, expect: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/kmq/debug/state", timeout=30) as resp:
            state = json.loads(resp.read())
        if sum(p["pending"] for p in state.values()) >= expect:
            return
        time.sleep(0.5)
    raise TimeoutError(f"the tracker did not reach {expect} in flight in {timeout_s}s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="10,1000,10000")
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    rows = []
    for q in [int(x) for x in args.counts.split(",")]:
        row = run_one(q, args.messages)
        rows.append(row)
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)
    path = save("queues", {"command": f"python -m bench.queues --counts {args.counts} "
                                      f"--messages {args.messages}", "rows": rows})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

"""One consumer process for bench/shared.py: receive one message at a time, work, ack.

argv: queue work_ms max_in_flight [batch] (settings from KMQ_* env); with ``batch`` it
receives up to 5000 at a time and acks them with one batch ack (no work). Prints JSON lines:
``{"ready": ...}`` once the consumer exists (and, in partition mode, with its group share),
then ``{"acked": n, "at": epoch_s}`` every 0.2 s while it works. Ends on SIGTERM.
``BENCH_CONSUMER_GC_THRESHOLD=N`` in its environment: ``gc.set_threshold(N, ...)`` first
(the consumer-side tuning docs/shared-queues.md measures). ``BENCH_CONSUMER_PREFETCH=N``:
the consumer's ``prefetch`` fixed at N (docs/shared-queues.md, "The read-ahead is not the bound").
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import kmq
from kmq.stats.gc_clock import set_young_threshold


def main() -> None:
    queue, work_ms, max_in_flight = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    batch = len(sys.argv) > 4 and sys.argv[4] == "batch"
    if os.environ.get("BENCH_CONSUMER_GC_THRESHOLD"):
        set_young_threshold(int(os.environ["BENCH_CONSUMER_GC_THRESHOLD"]))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = kmq.Client()
    prefetch = int(os.environ["BENCH_CONSUMER_PREFETCH"]) if os.environ.get("BENCH_CONSUMER_PREFETCH") else None
    c = client.consumer(queue, max_in_flight=max_in_flight, visibility_timeout_s=30,
                        batch_size=5000 if batch else 1000, prefetch=prefetch)
    print(json.dumps({"ready": True, "mode": c.mode, "share": sorted(c.group_share)}), flush=True)
    acked, last_at, first_at, reported = 0, 0.0, 0.0, time.monotonic()
    share = sorted(c.group_share)
    while not stop.is_set():
        if batch:
            got = c.receive_batch(5000, 0.1)
            if got:
                got.ack()
                acked += len(got)
                last_at = time.time()
                first_at = first_at or last_at
            m = None
        else:
            m = c.receive(0.1)
        if m is not None:
            if work_ms:
                time.sleep(work_ms / 1000)  # the work: I/O-bound, like an HTTP call
            m.ack()
            acked += 1
            last_at = time.time()
        now = time.monotonic()
        if now - reported >= 0.2:
            reported = now
            if sorted(c.group_share) != share:
                share = sorted(c.group_share)
            print(json.dumps({"acked": acked, "at": last_at, "first": first_at, "share": share}), flush=True)
    c.close()
    client.close()


if __name__ == "__main__":
    main()

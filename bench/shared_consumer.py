"""One consumer process for bench/shared.py: receive one message at a time, work, ack.

argv: queue work_ms max_in_flight (settings from KMQ_* env). Prints JSON lines on stdout:
``{"ready": ...}`` once the consumer exists (and, in partition mode, with its group share),
then ``{"acked": n, "at": epoch_s}`` every 0.2 s while it works. Ends on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import kmq


def main() -> None:
    queue, work_ms, max_in_flight = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = kmq.Client()
    c = client.consumer(queue, max_in_flight=max_in_flight, visibility_timeout_s=30,
                        flush_interval_s=float(os.environ.get("BENCH_FLUSH_S", "0.02")))
    print(json.dumps({"ready": True, "mode": c.mode, "share": sorted(c.group_share)}), flush=True)
    acked, last_at, reported = 0, 0.0, time.monotonic()
    share = sorted(c.group_share)
    while not stop.is_set():
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
            print(json.dumps({"acked": acked, "at": last_at, "share": share}), flush=True)
    c.close()
    client.close()


if __name__ == "__main__":
    main()

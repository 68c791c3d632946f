"""Child process for the SDK memory test: drain a backlog with a bounded max_in_flight.

argv: queue n max_in_flight prefetch_kbytes   (settings from KMQ_* env)
Checks the consumer's own counters after every receive and prints one JSON line:
{"received": n, "max_in_flight": ..., "max_held_records": ..., "rss_mb": [samples]}.
"""

import json
import sys

import psutil

import kmq


def held_records(c) -> int:
    """Records the consumer holds: not yet handed out, or handed out and not settled."""
    return sum(h.outstanding for h in list(c._held.values()))


def main() -> None:
    queue, n, max_in_flight, prefetch_kbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    me = psutil.Process()
    client = kmq.Client()
    # librdkafka's prefetch queue is the other bound of the process (its default: 64 MiB).
    c = client.consumer(queue, visibility_timeout_s=30, max_in_flight=max_in_flight,
                        config={"queued.max.messages.kbytes": prefetch_kbytes})
    received = peak_in_flight = peak_held = 0
    rss_mb = [me.memory_info().rss / 2**20]
    unacked = []
    while received < n:
        for m in c.receive_batch(200, timeout_s=1.0):
            received += 1
            unacked.append(m)
            peak_in_flight = max(peak_in_flight, c.in_flight)
            peak_held = max(peak_held, held_records(c))
        if len(unacked) >= 400:  # settle late: the consumer runs at its bound
            for m in unacked:
                m.ack()
            unacked.clear()
        if received % 10_000 < 200:
            rss_mb.append(me.memory_info().rss / 2**20)
    for m in unacked:
        m.ack()
    c.flush()
    rss_mb.append(me.memory_info().rss / 2**20)
    print(json.dumps({"received": received, "max_in_flight": peak_in_flight, "max_held_records": peak_held,
                      "rss_mb": rss_mb}), flush=True)
    c.close()


if __name__ == "__main__":
    main()

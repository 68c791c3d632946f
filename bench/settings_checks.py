"""What the dispatcher's settings check costs (docs/ordering.md, "Changing the ordering setting").

Records carrying a group (``kmq.group``) on a queue without ``ordering="group"`` make the
dispatcher ask the queues topic's end before it hands them out. This drains such a queue
with one consumer, two ways: ``flow`` sends while the consumer drains (a sender thread,
flushing every 500, so reads keep bringing new records), ``drain`` sends everything first.
Run it from two checkouts (the tracker comes from the working directory) to compare codes:

    python -m bench.settings_checks --messages 30000 --mode flow
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request

import kmq
from bench.common import stack

GROUPS = 100


def send(client: kmq.Client, queue: str, n: int, size: int, pace: bool) -> None:
    for i in range(n):
        client.send(queue, b"x" * size, group=f"g{i % GROUPS}")
        if pace and i % 500 == 499:
            client.flush()
            time.sleep(0.01)  # a steady flow, not one burst
    client.flush()


def run(n: int, size: int, mode: str) -> dict:
    with stack(dispatch="shared") as (settings, tracker, _broker):
        with kmq.Client(settings=settings) as client:
            queue = f"settings-checks-{int(time.time() * 1000)}"
            with client.consumer(queue, max_in_flight=2000) as consumer:
                assert consumer.receive(timeout_s=1) is None  # its credit is at the dispatcher
                sender = None
                if mode == "drain":
                    send(client, queue, n, size, pace=False)
                else:
                    sender = threading.Thread(target=send, args=(client, queue, n, size, True))
                started = time.perf_counter()
                if sender is not None:
                    sender.start()
                got, deadline = 0, time.monotonic() + 300
                while got < n and time.monotonic() < deadline:
                    batch = consumer.receive_batch(1000, timeout_s=5)
                    got += len(batch)
                    batch.ack()
                consumer.flush()
                elapsed = time.perf_counter() - started
                if sender is not None:
                    sender.join()
        with urllib.request.urlopen(tracker.url + "/kmq/stats", timeout=10) as r:
            stats = json.load(r)["dispatcher"]
    return {"mode": mode, "messages": n, "received": got, "msgs_per_s": round(got / elapsed),
            "settings_checks": stats.get("settings-checks"), "held_for_settings": stats.get("held-for-settings")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=30_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--mode", choices=("flow", "drain"), default="flow")
    args = ap.parse_args()
    print(json.dumps(run(args.messages, args.size, args.mode)))


if __name__ == "__main__":
    main()

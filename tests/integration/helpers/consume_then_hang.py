"""Child process for crash tests: receive, ack some (durably), report, then wait to be killed.

argv: bootstrap queue n_to_receive ack_every  (settings come from KMQ_* env)
Prints JSON lines: {"received": [...]} then {"acked": [...]} then "ready".
"""

import json
import sys
import threading

import kmq


def main() -> None:
    queue, n, ack_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = kmq.Client()
    c = client.consumer(queue, visibility_timeout_s=2, max_in_flight=n, batch_size=max(1, n // 7))
    received, acked = [], []
    while len(received) < n:
        for m in c.receive_batch(n - len(received), timeout_s=1.0):
            received.append(m.id)
            if len(received) % ack_every == 0:
                m.ack()
                acked.append(m.id)
    c.flush()  # acks durable: these must never come back
    print(json.dumps({"received": received}), flush=True)
    print(json.dumps({"acked": acked}), flush=True)
    print("ready", flush=True)
    threading.Event().wait()  # mid-batch, holding the rest: SIGKILL comes here


if __name__ == "__main__":
    main()

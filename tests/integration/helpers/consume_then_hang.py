"""Child process for crash tests: receive, ack some (durably), report, then wait to be killed.

argv: bootstrap queue n_to_receive ack_every  (settings come from KMQ_* env)
Prints JSON lines: {"received": [...]} then {"acked": [...]} then "ready".
"""

import json
import sys
import threading

import kmq

VISIBILITY_S = 6.0


def main() -> None:
    queue, n, ack_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = kmq.Client()
    # 6 s, not 2: what it receives must not time out before its acks reach the tracker (a
    # helper stalled for 2 s on a loaded machine would have its acked messages come back);
    # what it holds when SIGKILLed comes back 6 s after it was handed out.
    c = client.consumer(queue, visibility_timeout_s=VISIBILITY_S, max_in_flight=n, batch_size=max(1, n // 7))
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

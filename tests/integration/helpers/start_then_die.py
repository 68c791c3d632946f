"""Child process: receive a batch, make sure its START markers exist (or not), never commit, wait.

argv: queue n mode   mode = plain (START durable, offsets not committed)
                          | transactional (START and commit never leave their open transaction)
Prints "ready" once in that state; the parent SIGKILLs it.
"""

import sys
import threading

import kmq


def main() -> None:
    queue, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    client = kmq.Client()
    c = client.consumer(queue, visibility_timeout_s=2, max_in_flight=n, batch_size=n,
                        transactional=mode == "transactional",
                        )
    c._stop_flusher()  # nothing flushes or commits on its own
    got = 0
    while got < n:
        got += len(c.receive_batch(n - got, timeout_s=1.0))
    if mode == "plain":
        c._writer.flush(10)  # the START is on the markers topic; no fetch follows, no commit
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()

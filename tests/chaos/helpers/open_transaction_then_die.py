"""Child process: a transactional consumer that dies while its marker transaction is open.

argv: queue n [transactional_id]   (settings from KMQ_* env)
Receives n messages (their STARTs wait for the next transaction), begins that
transaction and writes them, prints "ready" and waits for SIGKILL: the transaction
stays open on the markers partition.
"""

import sys
import threading

import kmq


def main() -> None:
    queue, n = sys.argv[1], int(sys.argv[2])
    options = {"transactional_id": sys.argv[3]} if len(sys.argv) > 3 else {}
    client = kmq.Client()
    c = client.consumer(queue, visibility_timeout_s=2, max_in_flight=n, batch_size=n, transactional=True,
                        **options)
    c._stop_flusher()  # nothing flushes or commits on its own
    got = 0
    while got < n:
        got += len(c.receive_batch(n - got, timeout_s=1.0))
    w = c._writer
    w.producer.begin_transaction()
    w._produce(kmq.protocol.marker_codec.encode(w._pending))
    w.producer.flush(10)  # on the broker, inside a transaction that never ends
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()

"""One consumer of a queue in a thread: receives one message at a time and acks it."""

from __future__ import annotations

import threading


class AckingWorker(threading.Thread):
    """Keeps the ids it acked (``got``), the partitions they came from, the most messages its
    consumer held at once (``most_held``), and an exception that ended it (``error``)."""

    def __init__(self, client, queue: str, max_in_flight: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.consumer = client.consumer(queue, max_in_flight=max_in_flight, visibility_timeout_s=30)
        self.stop = stop
        self.got: list[str] = []
        self.partitions: set[int] = set()
        self.most_held = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                m = self.consumer.receive(0.1)
                self.most_held = max(self.most_held, self.consumer.in_flight)
                if m is not None:
                    self.got.append(m.id)
                    self.partitions.add(m.partition)
                    m.ack()
            self.consumer.close()
        except Exception as exc:  # surfaced by the test
            self.error = exc

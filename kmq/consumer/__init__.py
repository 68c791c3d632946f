"""The consumer side of kmq: :class:`Consumer` (what ``client.consumer(q)`` returns) and its parts.

- ``facade``: the :class:`Consumer` users call (receive, receive_batch, flush, close).
- ``live_settings``: the queue's settings, followed live (mode switches, purges).
- ``flusher``: the background thread that sends settlements and keepalives.
- ``held``: what a consumer holds (fetched ranges, their messages' fates, batches handed out).
- ``keepalive``: the pure keepalive round (which held messages to extend, which lapsed).
- ``marker_writer``: writing a consumer's marker records, plainly or in Kafka transactions.
"""

from kmq.consumer.facade import Consumer
from kmq.consumer.held import MessageBatch

__all__ = ["Consumer", "MessageBatch"]

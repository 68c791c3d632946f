"""kmq: message-queue semantics on Kafka.

Per-message ack, release (with delay), reject to a dead-letter topic,
visibility extension, delivery counts and delayed delivery, for many logical
queues sharing a few topics. This package is the SDK; it never imports
faust or pyspark. The redelivery tracker is a Faust service (``app/``).
"""

from kmq.backoff import Backoff, compute_backoff
from kmq.client import Client
from kmq.consumer import Consumer
from kmq.errors import (BrokerUnavailableError, ConfigError, ConsumerClosedError, DeliveryError,
                        InvalidQueueNameError, KmqError, MarkerDecodeError, MessageSettledError,
                        MessageTooLargeError, PermissionDeniedError, TokenRefusedError)
from kmq.consumer import MessageBatch
from kmq.message import Message
from kmq.queue_config import QueueConfig
from kmq.settings import Settings
from kmq.worker import Handler, Reject, handler
from kmq import aio  # kmq.aio.Client, for asyncio services

__all__ = [
    "Client", "Consumer", "Message", "MessageBatch", "Settings", "QueueConfig", "Backoff",
    "compute_backoff",
    "KmqError", "ConfigError", "InvalidQueueNameError", "MessageTooLargeError",
    "MarkerDecodeError", "MessageSettledError", "BrokerUnavailableError", "DeliveryError",
    "ConsumerClosedError", "PermissionDeniedError", "TokenRefusedError",
    "handler", "Handler", "Reject", "aio",
]
__version__ = "0.1.0"

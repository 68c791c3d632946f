"""The one exception tree of kmq.

::

    KmqError
     +-- ConfigError            a setting or argument is invalid (names it and the fix)
     |    +-- InvalidQueueNameError
     |    +-- MessageTooLargeError
     +-- MarkerDecodeError      bytes on the markers topic are not a marker (keeps them)
     +-- MessageSettledError    a verb on a message that was already acked/released/rejected
     +-- BrokerUnavailableError the broker did not answer in time (says where and how long)
     +-- DeliveryError          the broker refused or lost a record we produced
     +-- ConsumerClosedError    the consumer was used after close()
     +-- PermissionDeniedError  the token may not act on this queue (auth on)
          +-- TokenRefusedError no token, or one that is nobody's (``reason``: which)

Messages name the argument or setting and how to fix it; lower-level causes
are chained with ``raise ... from``.
"""

from __future__ import annotations


class KmqError(Exception):
    """Base class of every error kmq raises on purpose."""


class ConfigError(KmqError, ValueError):
    """A setting or argument is invalid; the message names it and the fix."""


class InvalidQueueNameError(ConfigError):
    """A queue id does not fit the allowed characters or length."""


class MessageTooLargeError(ConfigError):
    """A payload (with its headers) is above the broker's maximum record size."""


class MarkerDecodeError(KmqError):
    """Bytes read from the markers topic are not a valid marker batch.

    The offending bytes are kept in :attr:`data` so they can be set aside.
    """

    def __init__(self, reason: str, data: bytes) -> None:
        super().__init__(f"malformed marker record: {reason} ({len(data)} bytes)")
        self.reason = reason
        self.data = bytes(data)


class MessageSettledError(KmqError):
    """A verb was called on a message that is already settled."""


class BrokerUnavailableError(KmqError):
    """The broker did not answer; says which address and for how long we tried."""


class DeliveryError(KmqError):
    """The broker refused or lost a record that kmq produced."""


class ConsumerClosedError(KmqError):
    """The consumer was used after :meth:`kmq.Consumer.close`."""


class PermissionDeniedError(KmqError):
    """The token presented may not act on this queue (or auth needs a token)."""


class TokenRefusedError(PermissionDeniedError):
    """Auth is on and no token was presented, or one that is neither the admin's nor a
    tenant's. :attr:`reason` says which without naming where a token is given, so the CLI
    can name its ``--token`` where the SDK names ``KMQ_TOKEN or token=...``."""

    def __init__(self, reason: str, given_as: str | None = None) -> None:
        super().__init__(f"{reason} ({given_as})" if given_as else reason)
        self.reason = reason

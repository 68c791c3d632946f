"""A consumer's arguments, checked before anything happens; pure.

Each bad value is a :class:`~kmq.errors.ConfigError` naming the argument: a string was a
``TypeError`` from deep inside, NaN never passed (a receive polled for ever), and a
``close()`` that failed half way left the consumer closed with its verbs unsent.
"""

from __future__ import annotations

import math
from typing import Any

from kmq.errors import ConfigError
from kmq.protocol.limits import MAX_BATCH_SIZE, MAX_TIMEOUT_MS
from kmq.setting_checks import MAX_PROCESSING_S, MIN_TIMEOUT_S

MAX_EXTEND_S = MAX_TIMEOUT_MS / 1000  # SQS's visibility ceiling, 12 h (the codec's limit)
PLAIN_SECONDS = frozenset((int, float))  # receive's quick look; anything else: receive_timeout_s


def receive_timeout_s(timeout_s: Any) -> float:
    """A receive's ``timeout_s`` (not None): a number of seconds, not NaN; below 0 it is one
    look without waiting, infinite it waits like None."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s != timeout_s:
        raise ConfigError(f"timeout_s={timeout_s!r} must be a number of seconds (or None: wait until "
                          "a message comes)")
    return float(timeout_s)


def check_batch_count(max_messages: Any) -> None:
    """``receive_batch``'s ``max_messages``: a whole number, 1 or more."""
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
        raise ConfigError(f"max_messages={max_messages!r} must be a whole number >= 1")


def wait_s(timeout_s: Any, what: str) -> float:
    """``flush``'s and ``close``'s ``timeout_s``: a finite number of seconds, 0 or more."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) \
            or not (math.isfinite(timeout_s) and timeout_s >= 0):
        raise ConfigError(f"timeout_s={timeout_s!r} must be a finite number of seconds, 0 or more "
                          f"(how long {what} waits for the broker)")
    return float(timeout_s)


def check_arguments(visibility_timeout_s: Any, max_processing_s: Any, max_in_flight: Any, batch_size: Any,
                    prefetch: Any, flush_interval_s: Any) -> None:
    """``client.consumer(...)``'s numbers, each named with its bounds when it is wrong."""
    if visibility_timeout_s is not None:
        _check_positive("visibility_timeout_s", visibility_timeout_s, MAX_EXTEND_S)
    if max_processing_s is not None:
        _check_positive("max_processing_s", max_processing_s, MAX_PROCESSING_S)
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise ConfigError(f"max_in_flight={max_in_flight!r} must be a whole number >= 1")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ConfigError(f"batch_size={batch_size!r} must be a whole number from 1 to "
                          f"{MAX_BATCH_SIZE} (what one START marker may cover)")
    if prefetch is not None and (not isinstance(prefetch, int) or isinstance(prefetch, bool)
                                 or not 1 <= prefetch <= max_in_flight):
        raise ConfigError(f"prefetch={prefetch!r} must be a whole number from 1 to "
                          f"max_in_flight={max_in_flight}")
    if isinstance(flush_interval_s, bool) or not isinstance(flush_interval_s, (int, float)) \
            or not 0 < flush_interval_s <= 3600:
        raise ConfigError(f"flush_interval_s={flush_interval_s!r} must be a number of seconds in (0, 3600]")


def _check_positive(name: str, value: Any, limit: float) -> None:
    # At least a millisecond, as KMQ_* and a queue's settings: markers carry whole ms (0.0001 s was 0 ms).
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_TIMEOUT_S <= value <= limit:
        raise ConfigError(f"{name}={value!r} must be a number of seconds from {MIN_TIMEOUT_S:g} to {limit:g}")

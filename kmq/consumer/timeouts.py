"""A consumer's time arguments, checked before anything happens; pure.

Each bad value is a :class:`~kmq.errors.ConfigError` naming the argument: a string was a
``TypeError`` from deep inside, NaN never passed (a receive polled for ever), and a
``close()`` that failed half way left the consumer closed with its verbs unsent.
"""

from __future__ import annotations

import math
from typing import Any

from kmq.errors import ConfigError

PLAIN_SECONDS = frozenset((int, float))  # receive's quick look; anything else: receive_timeout_s


def receive_timeout_s(timeout_s: Any) -> float:
    """A receive's ``timeout_s`` (not None): a number of seconds, not NaN; below 0 it is one
    look without waiting, infinite it waits like None."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s != timeout_s:
        raise ConfigError(f"timeout_s={timeout_s!r} must be a number of seconds (or None: wait until "
                          "a message comes)")
    return float(timeout_s)


def wait_s(timeout_s: Any, what: str) -> float:
    """``flush``'s and ``close``'s ``timeout_s``: a finite number of seconds, 0 or more."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) \
            or not (math.isfinite(timeout_s) and timeout_s >= 0):
        raise ConfigError(f"timeout_s={timeout_s!r} must be a finite number of seconds, 0 or more "
                          f"(how long {what} waits for the broker)")
    return float(timeout_s)

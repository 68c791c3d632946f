"""When a delayed send is due: ``delay_s`` (seconds from now) or ``deliver_at`` (epoch
seconds), checked before anything is written (:meth:`kmq.Client.send`).

A send due already (no delay, a zero one, a ``deliver_at`` past) goes straight to the
queue; one due later is held by the tracker as a SCHEDULE marker until its time, at most
``KMQ_MAX_DELAY_S`` away.
"""

from __future__ import annotations

import time

from kmq import send_args
from kmq.errors import ConfigError


def due_ms(delay_s: float | None, deliver_at: float | None, max_delay_s: float) -> int | None:
    """When a send of these arguments is due, in epoch ms; None if due already (enqueue it
    directly). Raises :class:`~kmq.errors.ConfigError` naming the argument if it is invalid:
    both given, not a finite number, a negative ``delay_s``, or past ``max_delay_s``."""
    if delay_s is not None and deliver_at is not None:
        raise ConfigError("give delay_s or deliver_at, not both")
    if delay_s is None and deliver_at is None:
        return None
    now = time.time()
    if delay_s is not None:
        name, delay = "delay_s", send_args.finite_s("delay_s", delay_s)
    else:
        name, delay = "deliver_at", send_args.finite_s("deliver_at", deliver_at) - now
    if delay < 0 and name == "delay_s":
        raise ConfigError(f"delay_s={delay_s!r} is negative: give 0 or more seconds")
    if delay > max_delay_s:
        raise ConfigError(
            f"{name}={delay_s if name == 'delay_s' else deliver_at!r} is {delay:.0f} s away; "
            f"the limit is {max_delay_s:g} s (KMQ_MAX_DELAY_S)")
    if delay <= 0:
        return None  # due already: enqueue directly
    return int((now + delay) * 1000)

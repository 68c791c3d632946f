"""The keywords a user may give ``client.consumer(queue, ...)`` and ``@kmq.handler``.

Taken from :class:`~kmq.consumer.facade.Consumer`'s signature, less what the client fills
in itself, so a misspelt option is a :class:`~kmq.errors.ConfigError` naming the options
there are, not a ``TypeError`` from deep inside (or, in a worker, a traceback).
"""

from __future__ import annotations

import functools
import inspect
from typing import Iterable

from kmq.errors import ConfigError

# Consumer arguments the client passes itself.
_THE_CLIENTS = {"self", "settings", "queue", "queue_topic_partitions", "markers_topic_partitions",
                "lane_layout", "configs"}


@functools.cache  # the signature does not change: read it once
def consumer_options() -> tuple[str, ...]:
    """Every keyword ``client.consumer(queue, ...)`` takes, sorted."""
    from kmq.consumer.facade import Consumer

    return tuple(sorted(set(inspect.signature(Consumer.__init__).parameters) - _THE_CLIENTS))


def check_options(given: Iterable[str], where: str, allowed: Iterable[str] = (),
                  refused: Iterable[str] = ()) -> None:
    """Raise naming the first keyword of ``given`` that ``where`` does not take (the
    consumer's, and ``allowed``, but not ``refused``)."""
    known = (set(consumer_options()) | set(allowed)) - set(refused)
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(f"{where}: no option {unknown[0]!r}; use one of {', '.join(sorted(known))}")

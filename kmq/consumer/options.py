"""The keywords a user may give ``client.consumer(queue, ...)`` and ``@kmq.handler``.

Taken from :class:`~kmq.consumer.facade.Consumer`'s signature, less what the client fills
in itself, so a misspelt option is a :class:`~kmq.errors.ConfigError` naming the options
there are, not a ``TypeError`` from deep inside (or, in a worker, a traceback).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Iterable

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


def check_client_config(config: object) -> None:
    """Raise unless ``config`` (``client.consumer(q, config=...)``, librdkafka settings of
    the consumer's readers) is None or a dict keyed by property names, none of them one of
    :data:`KMQ_SETS`."""
    if config is not None and (not isinstance(config, dict) or not all(isinstance(k, str) for k in config)):
        raise ConfigError(f"config={config!r} must be a dict of librdkafka property names to values, "
                          "e.g. {'queued.max.messages.kbytes': 16384}")
    ours = sorted(set(config or ()) & KMQ_SETS)
    if ours:
        raise ConfigError(f"config={config!r}: {ours[0]!r} is a property kmq sets itself (at-least-once "
                          "depends on it: where a reader starts, what it commits, whose records it "
                          "reads); drop it and tune only the rest")


# Reader properties kmq's guarantees rest on (kmq.kafka.profiles, the sources): over them,
# "auto.offset.reset": "latest" skipped what a new group had not fetched yet, auto commits
# moved offsets past records no START covered, read_uncommitted handed out aborted sends.
KMQ_SETS = frozenset(("bootstrap.servers", "metadata.broker.list", "group.id", "auto.offset.reset",
                      "enable.auto.commit", "auto.commit.enable", "enable.auto.offset.store",
                      "isolation.level", "enable.partition.eof", "partition.assignment.strategy",
                      "group.protocol",
                      # the same, as topic properties (librdkafka's prefixed and nested forms)
                      "topic.auto.offset.reset", "topic.auto.commit.enable", "default.topic.config"))


def refused_client_config(config: dict[str, Any] | None, exc: BaseException) -> BaseException:
    """The error to raise for ``exc``, met building a reader from ``config``: a ConfigError
    naming ``config=`` where librdkafka refused a property in it, else ``exc`` itself."""
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not config or not isinstance(err, KafkaError) or err.code() != KafkaError._INVALID_ARG:
        return exc
    # librdkafka's words name the property ("No such configuration property: "x"").
    return ConfigError(f"config={config!r}: librdkafka refused it ({err.str()}); fix or drop that property "
                       "(https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md)")

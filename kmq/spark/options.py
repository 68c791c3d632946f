"""The Kafka source's options, parsed and validated (pure: no Spark, no Kafka).

The names and meanings follow Spark's official Kafka source for batch
queries, so a job can switch between it and :mod:`kmq.spark.source` by
changing only the format name (``kafka.*`` client settings aside: they are
librdkafka's here, the Java client's there; see :mod:`kmq.spark.session`):

===========================  ==================================================
``kafka.bootstrap.servers``  required; every ``kafka.*`` option goes to the
                             client with the prefix stripped (librdkafka names)
``subscribe``                comma-separated topics (one of these three)
``subscribePattern``         a regex that must match a whole topic name
``assign``                   JSON ``{"topic": [0, 1]}``
``startingOffsets``          ``earliest`` (default) or JSON
                             ``{"topic": {"0": 23, "1": -2}}`` (-2 = earliest)
``endingOffsets``            ``latest`` (default) or JSON (-1 = latest)
``minPartitions``            split big partitions so the read has at least this
                             many Spark partitions
``maxRecordsPerPartition``   split so no Spark partition reads more records
``includeHeaders``           add ``headers array<struct<key,value>>``
``failOnDataLoss``           fail (default) when requested offsets are gone;
                             ``false`` reads what is left
``kafkaConsumer.pollTimeoutMs``  longest wait for one fetch (default 120000)
===========================  ==================================================

Spark hands options over in a case-insensitive map whose keys are
lower-cased; we look every name up lower-cased for that reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from kmq.errors import ConfigError

EARLIEST = -2  # offset sentinels of the official source's JSON
LATEST = -1

# Client settings the source owns: letting a user set them would break the read.
_FORBIDDEN_KAFKA = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "a batch read never commits offsets",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "interceptor.classes": "not supported by this source",
    "enable.partition.eof": "the source needs it to find the true end of a partition",
}
# The Java client's names for credentials and key stores, which librdkafka refuses with words
# that do not name the option: said here with the librdkafka names to give instead.
_JAVA_ONLY_KAFKA = {
    "sasl.jaas.config": "a Java client option: give kafka.sasl.username and kafka.sasl.password",
    "ssl.truststore.": "Java key stores: give kafka.ssl.ca.location (a PEM file)",
    "ssl.keystore.": "Java key stores: give kafka.ssl.certificate.location and kafka.ssl.key.location (PEM)",
}
# Official options whose meaning we do not implement: refuse rather than ignore.
_UNSUPPORTED = ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp",
                "endingTimestamp", "startingOffsetsByTimestampStrategy")


# Kafka's internal topics: a pattern never selects them, as the Java consumer's
# subscribe(pattern) does not (exclude.internal.topics); librdkafka's metadata does not
# mark them, so they are named here.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True)
class ReadOptions:
    """Validated options of one batch read."""

    kafka: dict[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] = field(default_factory=dict)
    starting: str | dict[tuple[str, int], int] = "earliest"
    ending: str | dict[tuple[str, int], int] = "latest"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000

    def topic_matches(self, topic: str) -> bool:
        """Whether ``topic`` is selected by subscribe / subscribePattern / assign."""
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return (topic not in INTERNAL_TOPICS
                    and re.fullmatch(self.subscribe_pattern, topic) is not None)
        return topic in self.assign


def parse(options: Mapping[str, str]) -> ReadOptions:
    """Validate the source options (any key case); raise :class:`ConfigError` naming the option."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    for name in _UNSUPPORTED:
        if name.lower() in opts:
            raise ConfigError(f"option {name} is not supported by kmq's Kafka source: "
                              f"use startingOffsets/endingOffsets with explicit offsets")
    kafka = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    for k, why in _FORBIDDEN_KAFKA.items():
        if k in kafka:
            raise ConfigError(f"option kafka.{k} cannot be set: {why}")
    for k in kafka:
        why = next((w for name, w in _JAVA_ONLY_KAFKA.items()
                    if k == name or (name.endswith(".") and k.startswith(name))), None)
        if why is not None:
            raise ConfigError(f"option kafka.{k} is not one kmq's Kafka source (librdkafka) takes: {why}")
    if not kafka.get("bootstrap.servers", "").strip():
        raise ConfigError("option kafka.bootstrap.servers is required: give host:port[,host:port]")

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(chosen) != 1:
        raise ConfigError("give exactly one of the options subscribe, subscribePattern, assign "
                          f"(got {', '.join(chosen) or 'none'})")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: dict[str, tuple[int, ...]] = {}
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:  # else "," reads nothing and says nothing
            raise ConfigError(f"option subscribe={opts['subscribe']!r} names no topic: "
                              "give topic names separated by commas")
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option subscribePattern={pattern!r} is not a regex: {exc}") from exc
    else:
        assign = _parse_assign(opts["assign"])

    starting = _parse_offsets(opts.get("startingoffsets", "earliest"), "startingOffsets",
                              word="earliest", forbidden=LATEST)
    ending = _parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets",
                            word="latest", forbidden=EARLIEST)
    return ReadOptions(
        kafka=kafka, subscribe=subscribe, subscribe_pattern=pattern, assign=assign,
        starting=starting, ending=ending,
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition",
                                                "maxRecordsPerPartition"),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                      "kafkaConsumer.pollTimeoutMs") or 120_000,
    )


def _parse_assign(raw: str) -> dict[str, tuple[int, ...]]:
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not data:
            raise ValueError("not a non-empty object")
        out = {}
        for topic, parts in data.items():
            if not isinstance(parts, list) or not parts:
                raise ValueError(f"topic {topic} needs a non-empty list of partitions")
            bad = [p for p in parts if isinstance(p, bool) or not isinstance(p, int) or p < 0]
            if bad:  # int() would turn 1.5 into partition 1
                raise ValueError(f"topic {topic}: {bad} are not partition numbers (0, 1, ...)")
            out[str(topic)] = tuple(sorted(set(parts)))
        return out
    except (ValueError, TypeError) as exc:
        raise ConfigError(f'option assign={raw!r} must be JSON like {{"topic": [0, 1]}}: {exc}') from exc


def _parse_offsets(raw: str, name: str, *, word: str,
                   forbidden: int) -> str | dict[tuple[str, int], int]:
    text = raw.strip()
    if text.lower() == word:
        return word
    other = "latest" if word == "earliest" else "earliest"
    if text.lower() == other:
        raise ConfigError(f"option {name}={other} is not allowed in a batch read: use {word} or JSON")
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        out = {}
        for topic, parts in data.items():
            if not isinstance(parts, dict):
                raise ValueError(f"topic {topic} needs an object of partition -> offset")
            for p, off in parts.items():
                if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                    raise ValueError(f"offset {off!r} of {topic}/{p} is not an offset, -1 or -2")
                out[(str(topic), int(p))] = off
    except (ValueError, TypeError) as exc:
        raise ConfigError(f'option {name}={raw!r} must be {word} or JSON like '
                          f'{{"topic": {{"0": 23, "1": -2}}}}: {exc}') from exc
    bad = [f"{t}/{p}" for (t, p), off in out.items() if off == forbidden]
    if bad:
        which = "latest (-1)" if forbidden == LATEST else "earliest (-2)"
        raise ConfigError(f"option {name}: {which} is not allowed in a batch read ({', '.join(bad)})")
    return out


def _positive_int(opts: dict[str, str], key: str, name: str) -> int | None:
    if key not in opts:
        return None
    try:
        value = int(opts[key])
    except ValueError as exc:
        raise ConfigError(f"option {name}={opts[key]!r} must be a positive integer") from exc
    if value < 1:
        raise ConfigError(f"option {name}={value} must be a positive integer")
    return value


def _bool(opts: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"option {name}={raw!r} must be true or false")

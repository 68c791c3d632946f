"""The upper bounds of the ``KMQ_*`` numbers: each the largest value that still works.

Above these a value was accepted at start and broke later, far from its variable
(``kmq.setting_checks`` refuses it at start, naming the variable and the largest value):

- partition counts above 100,000: librdkafka refuses to create the topic
  (``NewTopic``: "num_partitions out of expected range 1..100000"), and Kafka's
  partition count is an int32 (``OverflowError`` from 2**31 on);
- ``KMQ_REPLICATION_FACTOR`` above 10,000: librdkafka's ``NewTopic`` range (-1..10000);
- ``KMQ_TRACKER_GC_THRESHOLD`` above a C int: ``gc.set_threshold`` raised
  ``OverflowError`` when the tracker started;
- ``KMQ_STATS_REFRESH_MS`` above ``threading.TIMEOUT_MAX``: the depth scan's
  ``Event.wait`` raised ``OverflowError`` in its thread and queue depths stood still;
  ``KMQ_STOP_TIMEOUT_S`` is bounded the same way (the stop watchdog's wait);
- retention above a Java long: Kafka refuses ``retention.ms`` when the topic is created;
- ``KMQ_TRACKER_FETCH_WAIT_MS`` at or above the tracker's request timeout: every fetch
  timed out before the broker answered, so the tracker read no marker.

Counts that only bound work (``KMQ_STATS_SCAN_LIMIT``, ``KMQ_REDELIVER_BATCH_LIMIT``,
``KMQ_METRICS_TOP_QUEUES``) are whole numbers of records or queues: at most a signed
64-bit number, the range of Kafka's offsets. The two tick periods are at most 12 h,
the longest visibility timeout: deadlines are only looked at that often. Standby
replicas are copies like a topic's replicas: at most 10,000 (Faust uses no more than
the workers minus one).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kmq.errors import ConfigError
from kmq.protocol.limits import MAX_TIMEOUT_MS

if TYPE_CHECKING:
    from kmq.settings import Settings

I64_MAX = (1 << 63) - 1  # Kafka's offsets and the JVM's long (retention.ms)
C_INT_MAX = (1 << 31) - 1  # gc.set_threshold's argument
MAX_TOPIC_PARTITIONS = 100_000  # librdkafka's NewTopic num_partitions range
MAX_REPLICATION_FACTOR = 10_000  # librdkafka's NewTopic replication_factor range
# threading.TIMEOUT_MAX is 4,294,967 s on Windows (the smallest; 9,223,372,036 s on Linux).
MAX_THREAD_WAIT_MS = 4_294_967_000

_PARTITIONS = (MAX_TOPIC_PARTITIONS, "librdkafka's most partitions of a topic it creates")
_RETENTION = (I64_MAX, "Kafka's bound of retention.ms (a Java long)")
_RECORDS = (I64_MAX, "a signed 64-bit number (Kafka's offsets)")
_TICK = (MAX_TIMEOUT_MS, "12 h, the longest visibility timeout (the tracker looks at deadlines only this often)")

# field -> (largest value, why). KMQ_DELIVERIES_PARTITIONS: each deliveries topic at most
# MAX_TOPIC_PARTITIONS (below), at most MAX_LANE_TOPICS topics (kmq.setting_checks).
UPPER_BOUNDS: dict[str, tuple[int, str]] = {
    "queue_partitions": _PARTITIONS,
    "markers_partitions": _PARTITIONS,
    "dlq_partitions": _PARTITIONS,
    "queues_partitions": _PARTITIONS,
    "deliveries_topic_partitions": _PARTITIONS,
    "replication_factor": (MAX_REPLICATION_FACTOR, "librdkafka's largest replication factor"),
    "standby_replicas": (MAX_REPLICATION_FACTOR, "the largest replication factor"),
    "queue_retention_ms": _RETENTION,
    "markers_retention_ms": _RETENTION,
    "dlq_retention_ms": _RETENTION,
    "deliveries_retention_ms": _RETENTION,
    "tick_interval_ms": _TICK,
    "idle_tick_ms": (MAX_TIMEOUT_MS, "12 h, the longest visibility timeout (an idle partition's clock "
                     "moves only this often)"),
    "redeliver_batch_limit": _RECORDS,
    "tracker_gc_threshold": (C_INT_MAX, "a C int (gc.set_threshold)"),
    "stats_refresh_ms": (MAX_THREAD_WAIT_MS, "threading.TIMEOUT_MAX (the depth scan's wait)"),
    "stop_timeout_s": (MAX_THREAD_WAIT_MS // 1000, "threading.TIMEOUT_MAX (the stop watchdog's wait)"),
    "stats_scan_limit": _RECORDS,
    "metrics_top_queues": _RECORDS,
}


def check_upper_bounds(s: Settings) -> None:
    """Raise ConfigError naming the variable and the largest value allowed for the first
    number above its bound (:data:`UPPER_BOUNDS`, the deliveries topics' size, the
    tracker's fetch wait)."""
    env = {f.name: f.metadata["env"] for f in dataclasses.fields(s)}
    for name, (limit, why) in UPPER_BOUNDS.items():
        value = getattr(s, name)
        if value > limit:
            raise ConfigError(f"{env[name]}={value} is above {limit:,}, {why}: give at most {limit:,}")
    per_topic = s.lane_layout.per_topic
    if per_topic > MAX_TOPIC_PARTITIONS:  # production: every lane in one topic unless spread
        raise ConfigError(
            f"KMQ_DELIVERIES_PARTITIONS={s.deliveries_partitions} makes a deliveries topic of "
            f"{per_topic:,} partitions, above {MAX_TOPIC_PARTITIONS:,}, {_PARTITIONS[1]}: give at "
            f"most {MAX_TOPIC_PARTITIONS:,}, or spread the lanes over topics with "
            f"KMQ_DELIVERIES_TOPIC_PARTITIONS (at most {MAX_TOPIC_PARTITIONS:,})")
    check_tracker_fetch_wait(s)


def check_tracker_fetch_wait(s: Settings) -> None:
    """The tracker's fetch wait below its request timeout (aiokafka gives up on a fetch the
    broker holds that long), with a second for the answer to travel."""
    from kmq.kafka.profiles import group_timeouts

    request_ms = group_timeouts(s).request_ms
    most = request_ms - 1000
    if s.tracker_fetch_wait_ms > most:
        raise ConfigError(
            f"KMQ_TRACKER_FETCH_WAIT_MS={s.tracker_fetch_wait_ms} does not fit in the tracker's request "
            f"timeout of {request_ms:,} ms (its rebalance timeout, from KMQ_SESSION_TIMEOUT_MS, + 30,000): every "
            f"fetch would time out before the broker answered; give at most {most:,}")

"""Create and check kmq's topics (idempotent): queue, markers, dead-letter, queues, deliveries.

The markers topic must have exactly as many partitions as the tracker's
tables and their changelog (Faust refuses otherwise, checked here too), and placement hashes over the queue
topic's partition count, so an existing topic with another count is an
error that says so rather than something silently tolerated.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.kafka.acls import changelog_topic
from kmq.kafka.profiles import client_config, topic_durability_config
from kmq.protocol.lane_layout import LaneLayout, discover
from kmq.protocol.limits import DEAD_LETTER_HEADROOM_BYTES, QUEUE_RECORD_HEADROOM_BYTES
from kmq.settings import Settings


def topic_specs(settings: Settings) -> list[NewTopic]:
    """The topics kmq needs, with explicit partition counts and retention."""
    rf = settings.effective_replication_factor
    lanes = settings.lane_layout
    common = {"cleanup.policy": "delete", **topic_durability_config(settings)}
    return [
        NewTopic(settings.queue_topic, settings.queue_partitions, rf,
                 config={**common, "retention.ms": str(settings.queue_retention_ms),
                         "max.message.bytes": str(settings.max_message_bytes + QUEUE_RECORD_HEADROOM_BYTES)}),
        NewTopic(settings.markers_topic, settings.markers_partitions, rf,
                 config={**common, "retention.ms": str(settings.markers_retention_ms),
                         # Broker time for marker timestamps where the broker honours it.
                         "message.timestamp.type": "LogAppendTime",
                         # A delayed send's SCHEDULE holds its payload (the client's limit).
                         "max.message.bytes": str(settings.max_message_bytes + 4096)}),
        NewTopic(settings.dlq_topic, settings.dlq_partitions, rf,
                 config={**common, "retention.ms": str(settings.dlq_retention_ms),
                         "max.message.bytes": str(settings.max_message_bytes + DEAD_LETTER_HEADROOM_BYTES)}),
        # Shared queues' deliveries: copies of queue records, read once, soon useless; the
        # lanes in one topic or several (kmq.protocol.lane_layout).
        *(NewTopic(name, lanes.per_topic, rf,
                   config={**common, "retention.ms": str(settings.deliveries_retention_ms),
                           "max.message.bytes": str(settings.max_message_bytes + 4096)})
          for name in lanes.names()),
        # The latest record per queue is its configuration: compact, never expire.
        NewTopic(settings.queues_topic, settings.queues_partitions, rf,
                 config={**common, "cleanup.policy": "compact"}),
    ]


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient({**client_config(settings), "socket.connection.setup.timeout.ms": 5000})


def topic_partition_counts(settings: Settings, timeout_s: float = 10.0) -> dict[str, int]:
    """Partition counts of the topics that exist; raises if the broker does not answer."""
    try:
        md = admin_client(settings).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {settings.bootstrap_servers} within {timeout_s:g}s "
            f"(KMQ_BOOTSTRAP_SERVERS): {exc}") from exc
    return partition_counts(md)


def partition_counts(metadata: Any) -> dict[str, int]:
    """Partition counts of the topics a librdkafka ``list_topics()`` answer holds."""
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def existing_lanes(settings: Settings, counts: Mapping[str, int] | None = None) -> LaneLayout:
    """The deliveries topics as they exist (kmq.protocol.lane_layout), from ``counts`` or the
    broker; a missing first one is a clear error."""
    layout = discover(settings.deliveries_topic, topic_partition_counts(settings) if counts is None else counts)
    if layout is None:
        raise ConfigError(f"topic {settings.deliveries_topic!r} does not exist: "
                          "create kmq's topics first (`faust -A app create-topics`)")
    return layout


def check_changelog_partitions(settings: Settings, counts: Mapping[str, int]) -> None:
    """The tracker table's changelog, if it exists, has the markers topic's count.

    Faust needs the same count (``PartitionsMismatch``) but finds out only at the first
    table write, in the markers agent, which its supervisor then restarts in a loop: a
    worker that runs and tracks nothing. A new count needs a new changelog, so a new app id.
    """
    name = changelog_topic(settings)
    have = counts.get(name)
    if have is not None and have != settings.markers_partitions:
        raise ConfigError(
            f"topic {name} (the tracker table's changelog of KMQ_APP_ID={settings.app_id}) has "
            f"{have} partitions but KMQ_MARKERS_PARTITIONS={settings.markers_partitions}: they must be "
            f"equal. Set KMQ_MARKERS_PARTITIONS={have}, or give the new count a new KMQ_APP_ID "
            "and new topics (docs/scaling.md, 'More partitions: migrate, never alter')")


def partition_count_error(settings: Settings, topic: str, have: int, want: int) -> str:
    """What to say of an existing ``topic`` of ``have`` partitions that kmq would create with
    ``want``: the variables that give ``want`` and a change of them that gives ``have``."""
    if topic in settings.lane_layout.names():
        return _lanes_error(settings, topic, have)
    count, name = {settings.queue_topic: ("KMQ_QUEUE_PARTITIONS", "KMQ_QUEUE_TOPIC"),
                   settings.markers_topic: ("KMQ_MARKERS_PARTITIONS", "KMQ_MARKERS_TOPIC"),
                   settings.dlq_topic: ("KMQ_DLQ_PARTITIONS", "KMQ_DLQ_TOPIC"),
                   settings.queues_topic: ("KMQ_QUEUES_PARTITIONS", "KMQ_QUEUES_TOPIC"),
                   }.get(topic, ("KMQ_*_PARTITIONS", "its KMQ_*_TOPIC"))
    return (f"topic {topic} has {have} partitions but {count}={want}: set {count}={have} to use it, "
            f"or name another topic with {name} (a topic's partition count is never altered: "
            "docs/scaling.md)")


def _lanes_error(settings: Settings, topic: str, have: int) -> str:
    """A deliveries topic's count comes from two variables (Settings.lane_layout): name the
    one in play, and offer only changes whose layout gives the topic ``have`` partitions."""
    lanes, per_topic = settings.deliveries_partitions, settings.deliveries_topic_partitions
    layout = settings.lane_layout
    index = layout.names().index(topic)
    if layout.topics == 1:
        gives = f"KMQ_DELIVERIES_PARTITIONS={lanes} makes it {layout.per_topic} (every lane in one topic)"
    else:
        default = " (the embedded profile's 16)" if per_topic == 0 else ""
        gives = (f"KMQ_DELIVERIES_TOPIC_PARTITIONS={per_topic}{default} makes it {layout.per_topic} "
                 f"(of KMQ_DELIVERIES_PARTITIONS={lanes} lanes)")
    if index == 0:  # the variable in play first, then the other, then both
        in_play, other = (("deliveries_partitions", "deliveries_topic_partitions") if layout.topics == 1
                          else ("deliveries_topic_partitions", "deliveries_partitions"))
        tries = [{in_play: have}, {other: have}, {"deliveries_partitions": have, "deliveries_topic_partitions": have}]
        per_topic_wanted, topics_wanted, what = have, None, "to use it"
    else:  # left from an earlier layout: end the lanes at the topics before it
        tries = [{"deliveries_partitions": index * layout.per_topic}]
        per_topic_wanted, topics_wanted, what = layout.per_topic, index, "to end the lanes before it"
    told = ""
    for change in tries:
        after = _layout_after(settings, change)
        if after and after.per_topic == per_topic_wanted and topics_wanted in (None, after.topics):
            told = f"set {' and '.join(f'KMQ_{k.upper()}={v}' for k, v in change.items())} {what}, or "
            break
    return (f"topic {topic} has {have} partitions but {gives}: {told}name "
            "other topics with KMQ_DELIVERIES_TOPIC (a topic's partition count is never altered: "
            "docs/scaling.md)")


def _layout_after(settings: Settings, change: Mapping[str, int]) -> LaneLayout | None:
    """The lane layout with ``change``, or None if it is out of bounds."""
    try:
        return settings.replace(**change).lane_layout
    except ConfigError:
        return None


def ensure_topics(settings: Settings, timeout_s: float = 15.0) -> list[str]:
    """Create missing kmq topics; check existing ones. Returns the names created."""
    existing = topic_partition_counts(settings, timeout_s)
    specs = topic_specs(settings)
    for spec in specs:
        have = existing.get(spec.topic)
        if have is not None and have != spec.num_partitions:
            raise ConfigError(partition_count_error(settings, spec.topic, have, spec.num_partitions))
    check_changelog_partitions(settings, existing)
    missing = [s for s in specs if s.topic not in existing]
    created = []
    if missing:
        admin = admin_client(settings)  # keep the handle alive until the futures resolve
        futures = admin.create_topics(missing, request_timeout=timeout_s)
        for name, fut in futures.items():
            try:
                fut.result(timeout=timeout_s)
                created.append(name)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                    raise
    # Metadata propagates asynchronously; wait until every topic is visible.
    deadline = time.monotonic() + timeout_s
    while True:
        counts = topic_partition_counts(settings, timeout_s)
        if all(counts.get(s.topic) == s.num_partitions for s in specs):
            return created
        if time.monotonic() > deadline:
            raise BrokerUnavailableError(f"topics not visible after {timeout_s:g}s: {counts}")
        time.sleep(0.05)

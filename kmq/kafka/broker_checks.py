"""What kmq needs of the broker's own configuration, checked when a tracker worker starts.

Relations between retentions and timeouts that no client setting can enforce
alone (docs/deployment.md, "Retention relations"):

- **Group offsets outlive queue messages**: a partition-mode queue's position is
  its group's committed offsets, which the broker deletes once the group has
  been empty for ``offsets.retention.minutes`` (Kafka's default: 7 days). The
  next consumer then starts from ``earliest`` and gets every acked message still
  on the queue topic again. So ``offsets.retention.minutes`` must cover
  ``KMQ_QUEUE_RETENTION_MS``, or the queue topic's own ``retention.ms`` when other
  tooling made it longer (or infinite): a worker refuses to start otherwise. (Shared
  queues keep their position, the dispatcher's cursors, in the tracker's
  compacted changelog and the queues topic: no such cliff.)
- **Transactions fit the broker's bound**: redrive's producer asks for a
  transaction timeout of at least ``KMQ_DELIVERY_TIMEOUT_MS`` (librdkafka wants
  message.timeout.ms <= transaction.timeout.ms); above the broker's
  ``transaction.max.timeout.ms`` (900 s by default) ``init_transactions`` fails.
- **Changelog tombstones outlive a stopped worker's data dir**: see
  :func:`changelog_topic_config` and ``app/data_dir.py``.

The decisions are pure functions of the reported configs (:func:`check_broker`,
:func:`check_changelog`); :func:`check_at_start` reads them with DescribeConfigs.
A broker that reports no config (the embedded Tansu broker) is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.kafka.profiles import client_config, topic_durability_config, tracker_record_limit
from kmq.settings import Settings

# Kafka's defaults, for messages (the check uses what the broker reports).
KAFKA_OFFSETS_RETENTION_MINUTES = 10080      # 7 days
KAFKA_TRANSACTION_MAX_TIMEOUT_MS = 900_000   # 15 min
MIN_REDRIVE_TRANSACTION_TIMEOUT_MS = 60_000
BROKER_CONFIGS = ("offsets.retention.minutes", "transaction.max.timeout.ms")


class NotAllowedToCheck(Exception):
    """The principal may not DescribeConfigs the brokers (an ACL left out): checks are skipped."""


@dataclass(frozen=True)
class Finding:
    """One broker setting that does not fit kmq's; ``fatal`` ones stop the worker."""

    setting: str
    message: str
    fatal: bool


def redrive_transaction_timeout_ms(s: Settings) -> int:
    """``transaction.timeout.ms`` of redrive's producer (kmq.ops.deadletters)."""
    return max(MIN_REDRIVE_TRANSACTION_TIMEOUT_MS, s.delivery_timeout_ms)


def changelog_delete_retention_ms(s: Settings) -> int:
    """How long the changelog keeps tombstones: as long as the markers topic keeps markers.

    A worker resumes from the changelog offset its RocksDB saved; a tombstone that
    compaction dropped before the worker read it leaves a settled entry alive in
    that RocksDB, and it is redelivered. Kafka's default is 1 day.
    """
    return s.markers_retention_ms


def changelog_topic_config(s: Settings) -> dict[str, str]:
    """Extra configs of the tracker's changelog (tables/tracker.py): durability and tombstones."""
    return {**topic_durability_config(s), "delete.retention.ms": str(changelog_delete_retention_ms(s)),
            "max.message.bytes": str(tracker_record_limit(s))}  # delayed sends' entries


def queue_kept_ms(s: Settings, topic_configs: Mapping[str, str | None] | None) -> int | None:
    """How long the queue topic keeps records: its own ``retention.ms`` if it exists and says
    longer than ``KMQ_QUEUE_RETENTION_MS`` (topics made by other tooling), else the setting;
    None for forever (``retention.ms=-1``)."""
    have = (topic_configs or {}).get("retention.ms")
    if have is None:
        return s.queue_retention_ms
    return None if int(have) < 0 else max(int(have), s.queue_retention_ms)


def check_broker(s: Settings, configs: Mapping[str, str | None],
                 queue_topic_configs: Mapping[str, str | None] | None = None) -> list[Finding]:
    """Findings for one broker's reported configs (a missing value is not checked).

    ``queue_topic_configs``: the queue topic's configs when it exists (its retention counts).
    """
    out = []
    minutes = configs.get("offsets.retention.minutes")
    kept_ms = queue_kept_ms(s, queue_topic_configs)
    if minutes is not None and (kept_ms is None or int(minutes) * 60_000 < kept_ms):
        if kept_ms is None:
            kept = f"the queue topic {s.queue_topic} keeps them forever (retention.ms=-1)"
            fix = (f"Give it a retention: kafka-configs.sh --alter --entity-type topics --entity-name "
                   f"{s.queue_topic} --add-config retention.ms={s.queue_retention_ms}")
        else:
            source = ("KMQ_QUEUE_RETENTION_MS" if kept_ms == s.queue_retention_ms
                      else f"the queue topic {s.queue_topic}'s retention.ms")
            kept = f"{source}={kept_ms} ({kept_ms / 86_400_000:.1f} days)"
            fix = (f"Set offsets.retention.minutes >= {-(-kept_ms // 60_000)} on every broker "
                   "(server.properties or KAFKA_OFFSETS_RETENTION_MINUTES; a restart applies it) "
                   f"or lower {source}")
        out.append(Finding("offsets.retention.minutes", (
            f"the broker's offsets.retention.minutes={minutes} ({int(minutes) / 1440:.1f} days) is "
            f"shorter than queue messages stay: {kept}. A partition-mode queue without consumers "
            "for longer loses its group's offsets and its next consumer gets every acked message "
            f"again. {fix}"), fatal=True))
    bound = configs.get("transaction.max.timeout.ms")
    if bound is not None and int(bound) < redrive_transaction_timeout_ms(s):
        out.append(Finding("transaction.max.timeout.ms", (
            f"KMQ_DELIVERY_TIMEOUT_MS={s.delivery_timeout_ms} needs transactions of "
            f"{redrive_transaction_timeout_ms(s)} ms (redrive), above the broker's "
            f"transaction.max.timeout.ms={bound}: init_transactions would fail. "
            f"{transaction_timeout_fix(s, int(bound))}"), fatal=True))
    return out


def transaction_timeout_fix(s: Settings, bound_ms: int | None) -> str:
    """The fix of a brokers' transaction.max.timeout.ms (None: not known) below redrive's
    transaction timeout: lowering KMQ_DELIVERY_TIMEOUT_MS helps only down to a minute, the
    least redrive asks for; below that only the brokers can move."""
    if bound_ms is None and s.delivery_timeout_ms > MIN_REDRIVE_TRANSACTION_TIMEOUT_MS:
        return "Lower KMQ_DELIVERY_TIMEOUT_MS or raise transaction.max.timeout.ms on the brokers"
    if bound_ms is not None and bound_ms >= MIN_REDRIVE_TRANSACTION_TIMEOUT_MS:
        return (f"Lower KMQ_DELIVERY_TIMEOUT_MS to at most {bound_ms} or raise "
                "transaction.max.timeout.ms on the brokers")
    return (f"Raise transaction.max.timeout.ms on the brokers to at least "
            f"{redrive_transaction_timeout_ms(s)} (redrive's transactions last at least "
            f"{MIN_REDRIVE_TRANSACTION_TIMEOUT_MS} ms, whatever KMQ_DELIVERY_TIMEOUT_MS)")


def check_changelog(s: Settings, topic: str, configs: Mapping[str, str | None]) -> list[Finding]:
    """Findings for the existing changelog topic's configs (warnings: the data-dir check covers it)."""
    have = configs.get("delete.retention.ms")
    want = changelog_delete_retention_ms(s)
    if have is None or int(have) >= want:
        return []
    return [Finding("delete.retention.ms", (
        f"changelog {topic} keeps tombstones delete.retention.ms={have} ms, less than "
        f"KMQ_MARKERS_RETENTION_MS={want}: a worker whose data dir is older than that is rebuilt "
        f"from the changelog at start (slower). Fix: kafka-configs.sh --alter --entity-type topics "
        f"--entity-name {topic} --add-config delete.retention.ms={want}"), fatal=False)]


def describe_broker_configs(s: Settings, timeout_s: float = 15.0) -> dict[int, dict[str, str]]:
    """Each broker's reported values of :data:`BROKER_CONFIGS` (empty dicts if it reports none)."""
    admin = AdminClient({**client_config(s), "socket.connection.setup.timeout.ms": 5000})
    try:
        brokers = admin.list_topics(timeout=timeout_s).brokers
        resources = [ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in brokers]
        out: dict[int, dict[str, str]] = {}
        for resource, fut in admin.describe_configs(resources, request_timeout=timeout_s).items():
            entries = fut.result(timeout=timeout_s)
            out[int(resource.name)] = {n: entries[n].value for n in BROKER_CONFIGS
                                       if n in entries and entries[n].value is not None}
        return out
    except KafkaException as exc:
        if "AUTHORIZATION_FAILED" in str(exc).upper():
            raise NotAllowedToCheck(str(exc)) from exc
        raise BrokerUnavailableError(
            f"could not read the brokers' configs at {s.bootstrap_servers} within {timeout_s:g}s "
            f"(the tracker needs DESCRIBE_CONFIGS on the cluster): {exc}") from exc


def describe_topic_config(s: Settings, topic: str, timeout_s: float = 15.0) -> dict[str, str] | None:
    """The topic's configs, or None when it does not exist yet."""
    admin = AdminClient({**client_config(s), "socket.connection.setup.timeout.ms": 5000})
    if topic not in admin.list_topics(timeout=timeout_s).topics:
        return None
    (fut,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)],
                                    request_timeout=timeout_s).values()
    try:
        return {n: e.value for n, e in fut.result(timeout=timeout_s).items()}
    except KafkaException as exc:
        if "UNKNOWN_TOPIC" in str(exc):
            return None
        raise


@dataclass(frozen=True)
class StartReport:
    """What a worker learnt at start: warnings to log, and how long the changelog keeps tombstones."""

    warnings: list[str]
    tombstones_kept_ms: int


def check_at_start(s: Settings, changelog_topic: str, timeout_s: float = 15.0) -> StartReport:
    """Read and check the brokers' and the changelog's configs.

    Raises :class:`ConfigError` naming every fatal finding.
    """
    findings: list[Finding] = []
    try:
        by_broker = describe_broker_configs(s, timeout_s)
    except NotAllowedToCheck as exc:
        # Tight ACLs should not stop the tracker; they only leave these checks undone.
        by_broker = {}
        findings.append(Finding("DescribeConfigs", (
            "could not read the brokers' offsets.retention.minutes and transaction.max.timeout.ms "
            f"({exc}): grant the tracker DESCRIBE_CONFIGS on the cluster (`kmq acls`) or check them "
            "by hand (docs/deployment.md, 'Retention relations')"), fatal=False))
    queue_topic = describe_topic_config(s, s.queue_topic, timeout_s) if by_broker else None
    for broker, configs in sorted(by_broker.items()):
        for f in check_broker(s, configs, queue_topic):
            if all(f.message != seen.message for seen in findings):
                findings.append(f)
    changelog = describe_topic_config(s, changelog_topic, timeout_s)
    kept_ms = changelog_delete_retention_ms(s)  # what Faust creates a missing changelog with
    if changelog is not None:
        findings += check_changelog(s, changelog_topic, changelog)
        if changelog.get("delete.retention.ms") is not None:
            kept_ms = min(kept_ms, int(changelog["delete.retention.ms"]))
    fatal = [f.message for f in findings if f.fatal]
    if fatal:
        raise ConfigError("; ".join(fatal))
    return StartReport([f.message for f in findings], kept_ms)

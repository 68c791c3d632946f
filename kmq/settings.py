"""One frozen settings object per process, read from ``KMQ_*`` environment variables.

Every field is declared once below with its environment variable, default and
meaning; :func:`kmq.config_reference.reference_markdown` renders that table as the configuration
reference, so code and docs cannot drift apart.

Profiles: ``embedded`` applies what the embedded Tansu broker needs (short
group timeouts, short fetch waits (Tansu answers a fetch only when its wait is over),
replication factor 1); ``production`` is for a durable Kafka cluster
(replication factor 3, min.insync.replicas 2, acks=all). What each profile
gives librdkafka and Faust is defined in one place, ``kmq.kafka.profiles``; the
SASL/SSL passthrough and its checks are in ``kmq.kafka.security``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kmq.kafka import security
from kmq.setting_names import check_keywords, keywords_named, sdk_keyword, warn_unknown_variables
from kmq.setting_values import SECRET_FIELDS, check_type, parse_value
from kmq.protocol.lane_layout import LaneLayout, planned
from kmq.setting_checks import check_values

# lz4 measured faster than none and zstd where payloads compress (python -m bench.throughput
# --compression ..., 100k messages x 3 runs; kmq receive+ack medians at 1024 B: 633k/s vs 316k/s
# repeated bytes, 470k/s vs 278k/s one random payload repeated), on the embedded broker. With
# each message's own random bytes (2026-11-26, 6 runs each, 300k messages) it costs little:
# receive+ack 310k/s lz4, 288k/s none, 226k/s zstd at 100 B; 161k, 181k, 177k at 1 KiB; sends
# 146k, 150k, 121k/s at 100 B. Embedded keeps none.
PROFILE_COMPRESSION = {"embedded": "none", "production": "lz4"}
# KIP-62's max.poll.interval.ms default (seed 004): user code may hold a message this long.
DEFAULT_MAX_PROCESSING_S = 300.0


def _setting(default: Any, env: str, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True)
class TopicNames:
    """The physical topics kmq uses."""

    queue: str
    markers: str
    dlq: str
    queues: str
    deliveries: str


@dataclass(frozen=True)
class Settings:
    """Validated kmq settings; build with :meth:`from_env`."""

    bootstrap_servers: str = _setting(
        "127.0.0.1:9092", "KMQ_BOOTSTRAP_SERVERS", "Kafka bootstrap servers, host:port[,host:port]")
    profile: str = _setting(
        "production", "KMQ_PROFILE",
        "`embedded` (Tansu dev broker: short timeouts, exact recovery) or `production`")
    data_dir: str = _setting("./kmq-data", "KMQ_DATA_DIR", "Tracker worker's RocksDB data directory (made at start; "
                             "one the worker cannot make or write stops it at once: one `error:` line)")
    web_host: str = _setting("127.0.0.1", "KMQ_WEB_HOST", "Address the tracker's web server binds")
    web_port: int = _setting(6066, "KMQ_WEB_PORT", "Port of the tracker's web server (1-65535)")
    app_id: str = _setting(
        "kmq-tracker", "KMQ_APP_ID", "Faust app id: the tracker's group id and changelog prefix (A-Z a-z 0-9 . _ -; up to 229 characters)")
    queue_topic: str = _setting("kmq.queue", "KMQ_QUEUE_TOPIC", "Topic holding queued messages (each of kmq's topics its own name, of 1-249 characters from A-Z a-z 0-9 . _ -)")
    markers_topic: str = _setting("kmq.markers", "KMQ_MARKERS_TOPIC", "Topic of START/ACK/... markers")
    dlq_topic: str = _setting("kmq.dlq", "KMQ_DLQ_TOPIC", "Dead-letter topic")
    queues_topic: str = _setting(
        "kmq.queues", "KMQ_QUEUES_TOPIC", "Compacted topic of per-queue settings (configure_queue)")
    deliveries_topic: str = _setting(
        "kmq.deliveries", "KMQ_DELIVERIES_TOPIC",
        "Topic the tracker hands shared queues' messages out on (one lane = one partition per consumer)")
    queue_partitions: int = _setting(8, "KMQ_QUEUE_PARTITIONS", "Partitions of the queue topic (at most 100,000)")
    markers_partitions: int = _setting(
        8, "KMQ_MARKERS_PARTITIONS", "Partitions of the markers topic (= tracker table partitions; at most 100,000)")
    dlq_partitions: int = _setting(4, "KMQ_DLQ_PARTITIONS", "Partitions of the dead-letter topic (at most 100,000)")
    queues_partitions: int = _setting(1, "KMQ_QUEUES_PARTITIONS", "Partitions of the queues topic (at most 100,000)")
    deliveries_partitions: int = _setting(
        256, "KMQ_DELIVERIES_PARTITIONS",
        "Lanes: partitions of the deliveries topics together (used when they are created; consumers "
        "use the topics' own counts); a shared-queue consumer fetches every copy on its (random) lane, "
        "so give a few times as many as busy shared-queue consumers run at once; at most 100,000 a topic)")
    deliveries_topic_partitions: int = _setting(
        0, "KMQ_DELIVERIES_TOPIC_PARTITIONS",
        "Lanes per deliveries topic: more lanes go to kmq.deliveries.1, .2, ... (0: 16 embedded, "
        "where a fetch costs in proportion to the topic's partitions; all in one topic production; "
        "at most 4096 topics, and at most 100,000)")
    replication_factor: int = _setting(
        0, "KMQ_REPLICATION_FACTOR", "Replication factor of created topics (0: 1 embedded, 3 production; at most 10,000)")
    queue_retention_ms: int = _setting(
        14 * 24 * 3600 * 1000, "KMQ_QUEUE_RETENTION_MS",
        "Queue topic retention; keep it well above KMQ_MAX_DELAY_S and any queue's visibility timeout "
        "and max_processing_s (redelivery reads the payload back from this topic; start-up checks "
        "only the KMQ_* values; at most 2**63-1, Kafka's long)")
    markers_retention_ms: int = _setting(
        7 * 24 * 3600 * 1000, "KMQ_MARKERS_RETENTION_MS", "Markers topic retention (at most 2**63-1)")
    dlq_retention_ms: int = _setting(
        14 * 24 * 3600 * 1000, "KMQ_DLQ_RETENTION_MS", "Dead-letter topic retention (at most 2**63-1)")
    deliveries_retention_ms: int = _setting(
        24 * 3600 * 1000, "KMQ_DELIVERIES_RETENTION_MS",
        "Deliveries topic retention (a delivery older than its visibility timeout is redelivered anyway; at most 2**63-1)")
    dispatch: str = _setting(
        "shared", "KMQ_DISPATCH",
        "Dispatch mode of queues that do not set one: `shared` (any number of consumers, the tracker "
        "dispatches) or `partition` (a consumer group over the queue's partitions); the same on every "
        "tracker and client, or set the mode per queue (`configure_queue`): a process on the other "
        "mode reads the queue afresh and gets its acked messages again")
    visibility_timeout_s: float = _setting(
        30.0, "KMQ_VISIBILITY_TIMEOUT_S",
        "Default time a received message stays invisible (0.001 s to 12 h)")
    max_processing_s: float = _setting(
        DEFAULT_MAX_PROCESSING_S, "KMQ_MAX_PROCESSING_S",
        "Default time a consumer keeps a message in user code invisible (keepalive) when its queue "
        "sets no `max_processing_s`; the visibility timeout stays crash detection (0: no keepalive "
        "in user code, a held message comes back after its visibility timeout; else 0.001 s to 7 days)")
    max_deliveries: int = _setting(
        5, "KMQ_MAX_DELIVERIES", "Deliveries before a message is dead-lettered (1 to 1,000,000) when its "
        "queue sets none; the same on every tracker and worker, or set it per queue: the tracker counts "
        "timeouts and releases against its own, a `kmq worker` its handler's failures against its own")
    max_delay_s: float = _setting(
        7 * 24 * 3600.0, "KMQ_MAX_DELAY_S", "Longest delay of a delayed send or release (at most 365 days)")
    tick_interval_ms: int = _setting(
        20, "KMQ_TICK_INTERVAL_MS", "How often the tracker checks for due deadlines (at most 43,200,000 ms: 12 h)")
    idle_tick_ms: int = _setting(
        1000, "KMQ_IDLE_TICK_MS", "Tick each owned partition at least this often (advances its clock; at most 43,200,000 ms: 12 h)")
    redeliver_batch_limit: int = _setting(
        20000, "KMQ_REDELIVER_BATCH_LIMIT", "Most messages one tick redelivers (at most 2**63-1)")
    session_timeout_ms: int = _setting(
        0, "KMQ_SESSION_TIMEOUT_MS", "Consumer group session timeout (0: 6000 embedded, 10000 production: a crashed worker's "
        "partitions move after it, so keep it well below KMQ_VISIBILITY_TIMEOUT_S; else 1,000 to 3,600,000)")
    max_message_bytes: int = _setting(
        1_000_000, "KMQ_MAX_MESSAGE_BYTES", "Largest record (payload, headers and the key: the queue's name) the broker accepts (at most 999,983,616)")
    group_prefix: str = _setting("kmq.", "KMQ_GROUP_PREFIX", "Prefix of each queue's consumer group id")
    security_protocol: str = _setting(
        "", "KMQ_SECURITY_PROTOCOL", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (empty: PLAINTEXT)")
    sasl_mechanism: str = _setting("", "KMQ_SASL_MECHANISM", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_username: str = _setting("", "KMQ_SASL_USERNAME", "SASL user name")
    sasl_password: str = _setting("", "KMQ_SASL_PASSWORD", "SASL password")
    ssl_cafile: str = _setting("", "KMQ_SSL_CAFILE", "CA certificate file (PEM) for SSL")
    standby_replicas: int = _setting(
        1, "KMQ_STANDBY_REPLICAS",
        "Tracker workers keeping a warm copy of each table partition (0: none; needs more workers; at most 10,000)")
    min_insync_replicas: int = _setting(
        0, "KMQ_MIN_INSYNC_REPLICAS",
        "min.insync.replicas of kmq's topics and changelog (0: broker default embedded, "
        "min(2, replication factor) production; at most the replication factor)")
    delivery_timeout_ms: int = _setting(
        300_000, "KMQ_DELIVERY_TIMEOUT_MS",
        "How long a producer retries a record before reporting it lost (librdkafka "
        "message.timeout.ms, Faust producer_request_timeout; at least 30000, the request "
        "timeout, at most 2,147,483,647)")
    web_advertised_host: str = _setting(
        "", "KMQ_WEB_ADVERTISED_HOST",
        "Host other tracker workers use to reach this one's web server (empty: KMQ_WEB_HOST, "
        "or the host name when that is a wildcard address)")
    ssl_certfile: str = _setting(
        "", "KMQ_SSL_CERTFILE", "Client certificate (PEM) for mutual TLS; needs KMQ_SSL_KEYFILE")
    ssl_keyfile: str = _setting("", "KMQ_SSL_KEYFILE", "Private key (PEM) of KMQ_SSL_CERTFILE")
    ssl_key_password: str = _setting(
        "", "KMQ_SSL_KEY_PASSWORD", "Password of KMQ_SSL_KEYFILE if it is encrypted")
    auth: str = _setting(
        "off", "KMQ_AUTH", "`on`: admin calls and web views need a token (tenant's or admin's)")
    admin_token: str = _setting(
        "", "KMQ_ADMIN_TOKEN",
        "The admin token (may do anything); required when KMQ_AUTH=on, at least 16 characters")
    token: str = _setting("", "KMQ_TOKEN", "The token this SDK/CLI process presents")
    transactional_starts: str = _setting(
        "off", "KMQ_TRANSACTIONAL_STARTS",
        "`on`: consumers write START markers and commit offsets in one Kafka transaction")
    tracker_gc_threshold: int = _setting(
        50_000, "KMQ_TRACKER_GC_THRESHOLD",
        "Tracker worker's allocations between young garbage collections (Python's default: 700; "
        "docs/shared-queues.md; at most 2,147,483,647, a C int)")
    tracker_fetch_wait_ms: int = _setting(
        0, "KMQ_TRACKER_FETCH_WAIT_MS",
        "Tracker's longest wait for markers in one fetch, at first (0: 20 embedded, 500 production); "
        "raised while fetches bring nothing though markers wait (docs/shared-queues.md); at most the "
        "tracker's request timeout less 1,000: the rebalance timeout + 29,000 (89,000 production by default)")
    stop_timeout_s: float = _setting(
        90.0, "KMQ_STOP_TIMEOUT_S",
        "Longest a tracker worker takes to stop after SIGTERM or SIGINT: past it (a broker that does not "
        "answer) it exits with status 1 and its next start rebuilds its tables from the changelog; keep "
        "it below your grace period before SIGKILL (compose: 100 s); at most 4,294,967")
    stats_refresh_ms: int = _setting(
        2000, "KMQ_STATS_REFRESH_MS",
        "How often a tracker worker re-reads queue depth and dead letters while its views are watched "
        "(at most 4,294,967,000)")
    stats_scan_limit: int = _setting(
        200_000, "KMQ_STATS_SCAN_LIMIT",
        "Most records per queue-topic partition the depth scan reads back from the end "
        "(a deeper backlog is shown as a lower bound; at most 2**63-1)")
    compression: str = _setting(
        "", "KMQ_COMPRESSION",
        "Compression of the SDK's and the tracker's librdkafka producers: none, gzip, snappy, lz4 "
        "or zstd (empty: the profile's default; the tracker reads every codec). zstd stores a "
        "shared queue's 100-byte messages in 2.16-2.18x their payload against lz4's 2.31x, for "
        "about 1.4x lz4's CPU in the sender (docs/shared-queues.md)")
    metrics_top_queues: int = _setting(
        100, "KMQ_METRICS_TOP_QUEUES",
        "Queues with their own label in /metrics per worker (the busiest); the rest are summed "
        "as queue=\"~other\" (at most 2**63-1)")
    log_format: str = _setting(
        "text", "KMQ_LOG_FORMAT",
        "Tracker worker's log lines: `text` (Faust's, on stderr) or `json` (one object a line on "
        "stdout: ts, level, logger, message, and exc when an exception is logged; start the worker "
        "as `faust --quiet -A app worker` to keep Faust's start banner off stdout)")

    # Shown as "***" when set (logs and tracebacks print settings).
    SECRETS = SECRET_FIELDS

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f.name}={'***' if f.name in self.SECRETS and getattr(self, f.name) else repr(getattr(self, f.name))}"
            for f in dataclasses.fields(self))
        return f"Settings({shown})"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if isinstance(getattr(self, f.name), os.PathLike):  # data_dir=Path(...): its text
                object.__setattr__(self, f.name, os.fspath(getattr(self, f.name)))
            check_type(f, getattr(self, f.name))
        check_values(self)
        security.check(self)

    # -- construction -------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *,
                 given_as: Callable[[str], str] = sdk_keyword, **overrides: Any) -> "Settings":
        """Read ``KMQ_*`` variables (``environ`` defaults to ``os.environ``); ``overrides`` are
        settings given as keywords, named in an error as ``given_as(keyword)`` says."""
        env = os.environ if environ is None else environ
        warn_unknown_variables(env, [f.metadata["env"] for f in dataclasses.fields(cls)])
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = f.metadata["env"]
            if name in env and env[name] != "":
                values[f.name] = parse_value(f, name, env[name])
        check_keywords(overrides, [f.name for f in dataclasses.fields(cls)])
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        with keywords_named(given, given_as):
            return cls(**values)

    def replace(self, **changes: Any) -> "Settings":
        """A copy with some fields changed (validated again)."""
        check_keywords(changes, [f.name for f in dataclasses.fields(Settings)])
        with keywords_named(changes):
            return dataclasses.replace(self, **changes)

    # -- derived values -----------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.profile == "embedded"

    @property
    def topics(self) -> TopicNames:
        """The one mapping from settings to topic names."""
        return TopicNames(self.queue_topic, self.markers_topic, self.dlq_topic, self.queues_topic,
                          self.deliveries_topic)

    @property
    def lane_layout(self) -> LaneLayout:
        """The deliveries topics to create (kmq.protocol.lane_layout); consumers and the
        dispatcher read the layout back from the topics as they exist."""
        per_topic = self.deliveries_topic_partitions or (16 if self.embedded else 0)
        return planned(self.deliveries_topic, self.deliveries_partitions, per_topic)

    @property
    def effective_replication_factor(self) -> int:
        if self.replication_factor:
            return self.replication_factor
        return 1 if self.embedded else 3

    @property
    def effective_session_timeout_ms(self) -> int:
        if self.session_timeout_ms:
            return self.session_timeout_ms
        # Tansu answers a group join after about half the session timeout. Production: a
        # crashed tracker worker's partitions (and their redeliveries) wait this long, so well
        # under the 30 s default visibility timeout; measured on the embedded broker, SIGKILL
        # of one of two tracker workers to the other owning all partitions: 6 s -> 9.2 s,
        # 10 s -> 16.4 s, 15 s -> 24.3 s, 45 s -> 70.3 s (bench/failover.py, docs/deployment.md).
        return 6000 if self.embedded else 10000

    @property
    def effective_tracker_fetch_wait_ms(self) -> int:
        if self.tracker_fetch_wait_ms:
            return self.tracker_fetch_wait_ms
        # Tansu answers a fetch only after the whole wait (docs/embedded-broker.md).
        return 20 if self.embedded else 500

    @property
    def effective_compression(self) -> str:
        """librdkafka ``compression.type`` of kmq's producers (KMQ_COMPRESSION, else the profile's)."""
        return self.compression or PROFILE_COMPRESSION[self.profile]

    @property
    def auth_on(self) -> bool:
        return self.auth == "on"

    def group_id(self, queue: str) -> str:
        """Consumer group of one logical queue."""
        return f"{self.group_prefix}{queue}"

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings every kmq client shares (address, security): see kmq.kafka.profiles."""
        from kmq.kafka.profiles import client_config
        return client_config(self)

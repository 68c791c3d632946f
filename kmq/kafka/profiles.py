"""The client settings of each profile, in one place: librdkafka and Faust/aiokafka.

Every Kafka client kmq creates starts from these functions, so durability and
group timeouts cannot differ between them:

- :func:`producer_config`: the SDK's producers (``kmq/client.py``,
  ``kmq/consumer/``) and the tracker's republisher (``agents/redeliver.py``);
- :func:`group_consumer_config`: the SDK's per-queue group consumers;
- :func:`reader_config`: consumers that assign partitions themselves and never
  join their group or commit (lane and reference readers, the dispatcher's and
  the tracker's readers and depth scan, the dead-letter and end-offset reads);
- :func:`client_config`: address and security, for the admin clients;
- :func:`faust_options`: the tracker's Faust app (``app/settings.py``);
- :func:`topic_durability_config`: kmq's topics (``kmq/kafka/admin.py``) and the
  tracker's changelog (``tables/tracker.py``).

``production`` (a durable Apache Kafka cluster): every write waits for all
in-sync replicas (librdkafka ``acks=all`` + idempotence, Faust
``producer_acks=-1``), topics with replication factor 3 and
min.insync.replicas 2 (a write survives one broker down), standby table
replicas, a 10 s group session (the Java client's 45 s default would hold a crashed
tracker worker's redeliveries past the 30 s visibility timeout; docs/deployment.md).

``embedded`` (the Tansu dev broker, docs/embedded-broker.md): the same acks and
idempotence, replication factor 1, short group timeouts (Tansu answers a
join after about half the session timeout) and short fetch waits (it answers a
fetch only when the wait is over). Faust's changelog batches stay normal: its
recovery is given the true end (app/consumer_tuning.py), not Tansu's ListOffsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kmq.kafka import security
from kmq.setting_checks import PROFILES, REQUEST_TIMEOUT_MS
from kmq.settings import Settings

MAX_POLL_INTERVAL_MS = 300_000       # the Java client's default
PRODUCTION_MIN_REBALANCE_MS = 60_000  # time a rebalance may take (Faust's default)
PRODUCTION_MIN_INSYNC_REPLICAS = 2


@dataclass(frozen=True)
class GroupTimeouts:
    """Consumer-group timing shared by librdkafka and aiokafka (milliseconds)."""

    session_ms: int
    heartbeat_ms: int
    rebalance_ms: int
    max_poll_interval_ms: int
    request_ms: int


def group_timeouts(s: Settings) -> GroupTimeouts:
    """Group timeouts of the profile; ``KMQ_SESSION_TIMEOUT_MS`` drives them all."""
    session = s.effective_session_timeout_ms
    # Several heartbeats per session, never more than the Java default (3 s) apart.
    heartbeat = max(100, min(3000, session // 6))
    rebalance = session if s.embedded else max(session, PRODUCTION_MIN_REBALANCE_MS)
    return GroupTimeouts(
        session_ms=session,
        heartbeat_ms=heartbeat,
        rebalance_ms=rebalance,
        max_poll_interval_ms=max(MAX_POLL_INTERVAL_MS, session + 1000),
        # aiokafka waits on a JoinGroup the broker holds up to the rebalance timeout.
        request_ms=rebalance + REQUEST_TIMEOUT_MS,
    )


def min_insync_replicas(s: Settings) -> int:
    """min.insync.replicas for kmq's topics and changelog (0: leave the broker's default)."""
    if s.min_insync_replicas:
        return s.min_insync_replicas
    if s.embedded:
        return 0
    return min(PRODUCTION_MIN_INSYNC_REPLICAS, s.effective_replication_factor)


def topic_durability_config(s: Settings) -> dict[str, str]:
    """Topic configs that make acks=all writes durable (min.insync.replicas)."""
    isr = min_insync_replicas(s)
    return {"min.insync.replicas": str(isr)} if isr else {}


# -- librdkafka -------------------------------------------------------------------


def client_config(s: Settings) -> dict[str, Any]:
    """What every librdkafka client shares: address and security."""
    return {"bootstrap.servers": s.bootstrap_servers, **security.librdkafka_config(s)}


def producer_config(s: Settings) -> dict[str, Any]:
    """A durable librdkafka producer; callers add throughput knobs and callbacks only."""
    return {
        **client_config(s),
        "acks": "all",
        "enable.idempotence": True,  # retries cannot duplicate or reorder records
        "max.in.flight.requests.per.connection": 5,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "message.timeout.ms": s.delivery_timeout_ms,
        # Java clients', aiokafka's and Faust's placement (docs/embedded-broker.md); kmq
        # passes explicit partitions, this covers anything keyed.
        "partitioner": "murmur2_random",
        "socket.keepalive.enable": True,
        "compression.type": s.effective_compression,
    }


def soft_marker_producer_config(s: Settings) -> dict[str, Any]:
    """A shared consumer's CREDIT producer: in order, quick to start, no idempotence.

    CREDITs are soft state that a duplicate cannot change (see
    ``MarkerWriter.send_soft``); every other marker goes through ``producer_config``.
    """
    return {**producer_config(s), "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1, "linger.ms": 0}


def group_consumer_config(s: Settings, group_id: str) -> dict[str, Any]:
    """A librdkafka group consumer with the profile's group timeouts."""
    t = group_timeouts(s)
    return {
        **client_config(s),
        "group.id": group_id,
        "session.timeout.ms": t.session_ms,
        "heartbeat.interval.ms": t.heartbeat_ms,
        "max.poll.interval.ms": t.max_poll_interval_ms,
        "isolation.level": "read_committed",
        "socket.keepalive.enable": True,
    }


def reader_config(s: Settings, group_id: str, *, fetch_wait_ms: int, eof: bool) -> dict[str, Any]:
    """A librdkafka consumer that assigns its partitions and never joins ``group_id`` or commits.

    ``fetch_wait_ms``: the embedded broker answers a fetch only when this wait is over
    (docs/embedded-broker.md), so it is each reader's latency floor; ``eof``: report a partition's end.
    Callers add what is their own (isolation level, read-ahead) to the dict.
    """
    return {
        **client_config(s),
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": eof,
        "fetch.wait.max.ms": fetch_wait_ms,
        "fetch.queue.backoff.ms": 10,  # librdkafka's 1 s default stalls a reader that keeps up
    }


def lane_fetch_wait_ms(s: Settings) -> int:
    """How long a shared queue's consumer waits on its lane per fetch.

    Apache Kafka answers a fetch as soon as records arrive, so a long wait costs no
    latency; the embedded broker answers only when the wait is over (docs/embedded-broker.md).
    """
    return 50 if s.embedded else 500


def reference_fetch_wait_ms(s: Settings) -> int:
    """How long a shared consumer's reference reader waits per fetch of a queue partition.

    A referred range is in the log before the consumer hears of it, so on Apache Kafka a
    fetch of it is answered at once and the wait only paces fetches at the partition's end
    (at 10 ms, a hundred empty fetches a second per consumer); the embedded broker answers
    only when the wait is over, so there it is the reader's latency floor.
    """
    return 10 if s.embedded else 500


def dispatcher_fetch_wait_ms(s: Settings) -> int:
    """How long the tracker's dispatcher waits per fetch of a queue partition (as above)."""
    return 10 if s.embedded else 100


# -- Faust / aiokafka -------------------------------------------------------------


TRACKER_RECORD_HEADROOM_BYTES = 65_536  # an entry's fields beside a delayed send's payload


def tracker_record_limit(s: Settings) -> int:
    """The largest record the tracker writes (a delayed send's table entry): what the SDK
    may send (``KMQ_MAX_MESSAGE_BYTES``) and room for the entry's own fields. A SCHEDULE
    above ``KMQ_MAX_MESSAGE_BYTES`` is set aside (agents/track_markers.py), so none is larger."""
    return s.max_message_bytes + TRACKER_RECORD_HEADROOM_BYTES


def faust_options(s: Settings) -> dict[str, Any]:
    """The durability and timing options of the tracker's ``faust.App`` (no faust import).

    ``app/settings.py`` adds the address, storage, web server and credentials.
    Faust's producer is not idempotent outside exactly-once mode; its writes
    (changelog, TICKs) are idempotent by content, and aiokafka keeps one
    batch in flight per partition, so a retry cannot reorder them.
    """
    t = group_timeouts(s)
    opts: dict[str, Any] = {
        "producer_acks": -1,
        # A delayed send's table entry holds its payload: aiokafka's 1,000,000-byte default
        # refused one at KMQ_MAX_MESSAGE_BYTES and the worker crashed (an audit, 2026-11-29).
        "producer_max_request_size": tracker_record_limit(s),
        "producer_request_timeout": s.delivery_timeout_ms / 1000,
        "topic_replication_factor": s.effective_replication_factor,
        "table_standby_replicas": s.standby_replicas,
        "broker_session_timeout": t.session_ms / 1000,
        "broker_heartbeat_interval": t.heartbeat_ms / 1000,
        "broker_rebalance_timeout": t.rebalance_ms / 1000,
        "broker_request_timeout": t.request_ms / 1000,
        "broker_max_poll_interval": t.max_poll_interval_ms / 1000,
        "consumer_auto_offset_reset": "earliest",
    }
    if s.embedded:
        # Changelog batches stay normal: recovery reads to the true end
        # (app/consumer_tuning.py), not to the embedded broker's ListOffsets.
        opts.update(broker_commit_interval=1.0)
    return opts


# -- documentation ----------------------------------------------------------------


def reference_markdown() -> str:
    """The profiles and security sections of the configuration reference (generated)."""
    by_profile = {p: Settings(profile=p) for p in PROFILES}
    rows = [
        "## Profiles",
        "",
        "`KMQ_PROFILE` picks the client settings below (`kmq/kafka/profiles.py`, the one place",
        "they are defined), shown with every other variable at its default. Each row",
        "names the variable that drives it, if any.",
        "",
        "### librdkafka producers (SDK sends and markers, tracker redelivery)",
        "",
        *_table(by_profile, lambda s: _without_address(producer_config(s)), _RDKAFKA_SOURCES),
        "",
        "### librdkafka group consumers (SDK, one group per queue)",
        "",
        *_table(by_profile, lambda s: _without_address(group_consumer_config(s, "kmq.<queue>")),
                _RDKAFKA_SOURCES),
        "",
        "### Faust (the tracker worker)",
        "",
        *_table(by_profile, faust_options, _FAUST_SOURCES),
        "",
        "### Topics (queue, markers, dead-letter, changelog)",
        "",
        *_table(by_profile, lambda s: {"replication factor": s.effective_replication_factor,
                                       **topic_durability_config(s)},
                {"replication factor": "KMQ_REPLICATION_FACTOR",
                 "min.insync.replicas": "KMQ_MIN_INSYNC_REPLICAS"}),
        "",
        "## Security (SASL/SSL)",
        "",
        "The same variables secure the SDK, the tracker's own librdkafka clients and",
        "Faust (aiokafka). Combinations that cannot work fail at start with the fix.",
        "",
        "| variable | librdkafka | aiokafka (Faust) |",
        "| --- | --- | --- |",
    ]
    env = {f: _env_name(f) for f in security.LIBRDKAFKA_NAMES}
    for name, rd in security.LIBRDKAFKA_NAMES.items():
        rows.append(f"| `{env[name]}` | `{rd}` | `{security.AIOKAFKA_NAMES[name]}` |")
    return "\n".join(rows) + "\n"


_RDKAFKA_SOURCES = {
    "group.id": "KMQ_GROUP_PREFIX",
    "message.timeout.ms": "KMQ_DELIVERY_TIMEOUT_MS",
    "compression.type": "KMQ_COMPRESSION",
    "session.timeout.ms": "KMQ_SESSION_TIMEOUT_MS",
    "heartbeat.interval.ms": "KMQ_SESSION_TIMEOUT_MS",
    "max.poll.interval.ms": "KMQ_SESSION_TIMEOUT_MS",
}
_FAUST_SOURCES = {
    "producer_max_request_size": "KMQ_MAX_MESSAGE_BYTES",
    "producer_request_timeout": "KMQ_DELIVERY_TIMEOUT_MS",
    "topic_replication_factor": "KMQ_REPLICATION_FACTOR",
    "table_standby_replicas": "KMQ_STANDBY_REPLICAS",
    "broker_session_timeout": "KMQ_SESSION_TIMEOUT_MS",
    "broker_heartbeat_interval": "KMQ_SESSION_TIMEOUT_MS",
    "broker_rebalance_timeout": "KMQ_SESSION_TIMEOUT_MS",
    "broker_request_timeout": "KMQ_SESSION_TIMEOUT_MS",
    "broker_max_poll_interval": "KMQ_SESSION_TIMEOUT_MS",
}


def _without_address(conf: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in conf.items() if k != "bootstrap.servers"}


def _env_name(field_name: str) -> str:
    return Settings.__dataclass_fields__[field_name].metadata["env"]


def _table(by_profile: dict[str, Settings], build: Any, sources: dict[str, str]) -> list[str]:
    built = {p: build(s) for p, s in by_profile.items()}
    keys: list[str] = []
    for conf in built.values():
        keys += [k for k in conf if k not in keys]
    rows = [f"| setting | {' | '.join(by_profile)} | from |",
            "| --- |" + " --- |" * len(by_profile) + " --- |"]
    for k in keys:
        cells = " | ".join(f"`{built[p][k]}`" if k in built[p] else "-" for p in by_profile)
        src = f"`{sources[k]}`" if k in sources else ""
        rows.append(f"| `{k}` | {cells} | {src} |")
    return rows

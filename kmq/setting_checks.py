"""The checks of a whole ``Settings`` object: each value within its bounds, and the values
that must agree (retention longer than any wait, min.insync.replicas within the replication
factor). Each error names the ``KMQ_*`` variable and the fix."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from kmq.errors import ConfigError
from kmq.protocol.lane_layout import MAX_LANE_TOPICS
from kmq.protocol.limits import DEAD_LETTER_HEADROOM_BYTES, MAX_DELAY_MS, MAX_TIMEOUT_MS
from kmq.setting_bounds import check_upper_bounds

if TYPE_CHECKING:
    from kmq.settings import Settings

PROFILES = ("embedded", "production")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")  # librdkafka compression.type values
MAX_PROCESSING_S = 7 * 24 * 3600.0  # the longest max_processing_s of a queue or of KMQ_MAX_PROCESSING_S
MAX_DELIVERIES = 1_000_000  # the largest max_deliveries, as kmq.queue_config allows a queue
MIN_TIMEOUT_S = 0.001  # the shortest visibility timeout or max_processing_s, as kmq.queue_config
REQUEST_TIMEOUT_MS = 30_000  # librdkafka request.timeout.ms; a delivery timeout must cover one
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")  # Kafka's legal characters
MAX_TOPIC_NAME = 249
TRACKER_TABLE = "tracker"  # tables/tracker.py: the tracker's one table, hence its changelog's name
MIN_SESSION_TIMEOUT_MS = 1000  # a heartbeat is at least 100 ms apart: several a session
# Settings librdkafka takes within bounds: above them the first send or consumer failed with
# a KafkaException (message.max.bytes is at most KMQ_MAX_MESSAGE_BYTES + 16384: the
# tracker's dead letters, kmq.protocol.limits).
LIBRDKAFKA_LIMITS = (("delivery_timeout_ms", 2_147_483_647, "message.timeout.ms"),
                     ("max_message_bytes", 1_000_000_000 - DEAD_LETTER_HEADROOM_BYTES,
                      f"message.max.bytes (with {DEAD_LETTER_HEADROOM_BYTES} for dead-letter headers)"),
                     ("session_timeout_ms", 3_600_000, "session.timeout.ms"))


def check_values(s: Settings) -> None:
    """Raise ConfigError naming the variable and the fix for the first value out of bounds."""
    if s.profile not in PROFILES:
        raise ConfigError(
            f"KMQ_PROFILE={s.profile!r} is not a profile: use one of {', '.join(PROFILES)}")
    if not s.bootstrap_servers.strip():
        raise ConfigError("KMQ_BOOTSTRAP_SERVERS is empty: give host:port of a Kafka broker")
    if not (0 < s.web_port < 65536):
        raise ConfigError(f"KMQ_WEB_PORT={s.web_port} is not a TCP port (1-65535)")
    if not 1 <= s.max_deliveries <= MAX_DELIVERIES:  # a queue's own max_deliveries has the same bounds
        raise ConfigError(f"KMQ_MAX_DELIVERIES={s.max_deliveries} must be from 1 to {MAX_DELIVERIES:,}")
    # Below a millisecond, markers carry a timeout of 0 (a queue's own settings refuse it too).
    if s.visibility_timeout_s < MIN_TIMEOUT_S:
        raise ConfigError(f"KMQ_VISIBILITY_TIMEOUT_S={s.visibility_timeout_s:g} is below "
                          f"{MIN_TIMEOUT_S} s: give at least {MIN_TIMEOUT_S}")
    if 0 < s.max_processing_s < MIN_TIMEOUT_S:
        raise ConfigError(f"KMQ_MAX_PROCESSING_S={s.max_processing_s:g} is below {MIN_TIMEOUT_S} s: "
                          f"give at least {MIN_TIMEOUT_S}, or 0 for no keepalive")
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            allow_zero = f.name in ("replication_factor", "session_timeout_ms",
                                    "standby_replicas", "min_insync_replicas",
                                    "tracker_fetch_wait_ms", "max_processing_s",
                                    "deliveries_topic_partitions")
            if value < 0 or (value == 0 and not allow_zero):
                shown = value if isinstance(value, int) else f"{value:g}"
                raise ConfigError(f"{f.metadata['env']}={shown} is "
                                  + ("negative: give 0 or more" if allow_zero else
                                     "not above 0: give a positive number"))
    if s.lane_layout.topics > MAX_LANE_TOPICS:
        raise ConfigError(
            f"KMQ_DELIVERIES_PARTITIONS={s.deliveries_partitions} at "
            f"KMQ_DELIVERIES_TOPIC_PARTITIONS={s.lane_layout.per_topic} makes "
            f"{s.lane_layout.topics} deliveries topics, above {MAX_LANE_TOPICS}: raise the second")
    if 0 < s.session_timeout_ms < MIN_SESSION_TIMEOUT_MS:
        raise ConfigError(f"KMQ_SESSION_TIMEOUT_MS={s.session_timeout_ms} is below {MIN_SESSION_TIMEOUT_MS:,} ms: "
                          f"give 0 (the profile's) or at least {MIN_SESSION_TIMEOUT_MS:,} (a heartbeat every "
                          "100 ms at least; brokers refuse sessions below group.min.session.timeout.ms, "
                          "6,000 by default)")
    check_upper_bounds(s)
    check_bootstrap_servers(s)
    check_web_hosts(s)
    check_topic_names(s)
    for name, limit, what in LIBRDKAFKA_LIMITS:
        if getattr(s, name) > limit:
            raise ConfigError(f"KMQ_{name.upper()}={getattr(s, name)} is above {limit:,}, "
                              f"librdkafka's bound of {what}: give at most {limit:,}")
    if s.max_delay_s * 1000 > MAX_DELAY_MS:
        raise ConfigError(f"KMQ_MAX_DELAY_S={s.max_delay_s:.15g} is above the marker codec's limit "
                          f"of {MAX_DELAY_MS // 1000} s (365 days): lower it")
    if s.visibility_timeout_s * 1000 > MAX_TIMEOUT_MS:
        raise ConfigError(f"KMQ_VISIBILITY_TIMEOUT_S={s.visibility_timeout_s:.15g} is above the "
                          f"limit of {MAX_TIMEOUT_MS // 1000} s (12 h): lower it")
    if s.max_processing_s > MAX_PROCESSING_S:
        raise ConfigError(f"KMQ_MAX_PROCESSING_S={s.max_processing_s:.15g} is above the limit of "
                          f"{MAX_PROCESSING_S:g} s (7 days): lower it")
    if s.auth not in ("on", "off"):
        raise ConfigError(f"KMQ_AUTH={s.auth!r}: use on or off")
    if s.dispatch not in ("shared", "partition"):
        raise ConfigError(f"KMQ_DISPATCH={s.dispatch!r}: use shared or partition")
    if s.compression not in ("",) + COMPRESSIONS:
        raise ConfigError(f"KMQ_COMPRESSION={s.compression!r}: use one of {', '.join(COMPRESSIONS)}")
    if s.log_format not in ("text", "json"):
        raise ConfigError(f"KMQ_LOG_FORMAT={s.log_format!r}: use text or json")
    if s.transactional_starts not in ("on", "off"):
        raise ConfigError(f"KMQ_TRANSACTIONAL_STARTS={s.transactional_starts!r}: use on or off")
    if s.auth == "on" and len(s.admin_token) < 16:
        raise ConfigError("KMQ_AUTH=on needs KMQ_ADMIN_TOKEN of at least 16 characters "
                          "(e.g. from `python -c 'import kmq.ops.tenancy as t; print(t.new_token())'`)")
    check_durability(s)


def check_web_hosts(s: Settings) -> None:
    """KMQ_WEB_HOST one host name or address (a blank one was taken for a wildcard: refused as
    an open bind with auth off, handed to the web server as it was with auth on);
    KMQ_WEB_ADVERTISED_HOST empty (KMQ_WEB_HOST) or one host name (it goes into a URL)."""
    if not s.web_host.strip():
        raise ConfigError(f"KMQ_WEB_HOST={s.web_host!r} is blank: give the address the tracker's web "
                          "server binds, e.g. 127.0.0.1 (or 0.0.0.0 for every interface, with KMQ_AUTH=on)")
    for env, host in (("KMQ_WEB_HOST", s.web_host), ("KMQ_WEB_ADVERTISED_HOST", s.web_advertised_host)):
        # A port or a scheme in it reached the web server's URL and crashed the tracker at start.
        bad = ("whitespace" if any(c.isspace() for c in host)
               else "a port or a URL" if "/" in host or "@" in host or host.count(":") == 1
               else None)
        if bad:
            raise ConfigError(f"{env}={host!r} contains {bad}: give one host name or address, "
                              "e.g. tracker-1 or 10.0.0.5 (the port is KMQ_WEB_PORT)"
                              + (", or leave it empty for KMQ_WEB_HOST" if env == "KMQ_WEB_ADVERTISED_HOST" else ""))


def check_bootstrap_servers(s: Settings) -> None:
    """Each of KMQ_BOOTSTRAP_SERVERS' ``host:port`` with a port that is a number (a word there
    was taken, and the tracker crashed at start without naming the variable)."""
    for server in s.bootstrap_servers.split(","):
        address = server.strip().rpartition("://")[2]
        if address.startswith("["):  # [IPv6]:port
            port = address.partition("]")[2].removeprefix(":")
            if not port:
                continue
        elif address.count(":") == 1:
            port = address.partition(":")[2]
        else:  # no port (librdkafka's default), or a bare IPv6 address
            continue
        if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(f"KMQ_BOOTSTRAP_SERVERS={s.bootstrap_servers!r}: the port of {server.strip()!r} "
                              "is not a TCP port (1-65535): give host:port[,host:port]")


def fausts_topics(app_id: str) -> dict[str, str]:
    """The topics the tracker's Faust app names after KMQ_APP_ID, each with what it is."""
    return {f"{app_id}-{TRACKER_TABLE}-changelog": "the tracker table's changelog",
            f"{app_id}-__assignor-__leader": "Faust's leader topic"}


def check_topic_names(s: Settings) -> None:
    """Each topic a name Kafka takes, no two the same (a markers topic that is the queue
    topic makes the tracker read messages as markers and consumers receive markers), and none
    one of Faust's topics of KMQ_APP_ID (a markers topic that is the changelog was taken, and
    the tracker delivered nothing)."""
    t = s.topics
    named = {"KMQ_QUEUE_TOPIC": t.queue, "KMQ_MARKERS_TOPIC": t.markers, "KMQ_DLQ_TOPIC": t.dlq,
             "KMQ_QUEUES_TOPIC": t.queues, "KMQ_DELIVERIES_TOPIC": t.deliveries}
    for env, name in named.items():
        longest = max(s.lane_layout.names(), key=len) if env == "KMQ_DELIVERIES_TOPIC" else name
        if not TOPIC_NAME.fullmatch(name) or name in (".", "..") or len(longest) > MAX_TOPIC_NAME:
            raise ConfigError(f"{env}={name!r} is not a Kafka topic name: use 1-{MAX_TOPIC_NAME} characters "
                              "from A-Z a-z 0-9 . _ -" + (f" (lane topics add a suffix: {longest!r})"
                                                          if longest != name else ""))
    internal = max(fausts_topics(s.app_id), key=len)
    if not TOPIC_NAME.fullmatch(s.app_id) or len(internal) > MAX_TOPIC_NAME:
        raise ConfigError(f"KMQ_APP_ID={s.app_id!r} names the tracker's changelog and internal topics "
                          f"({internal!r}): use up to {MAX_TOPIC_NAME - len(internal) + len(s.app_id)} "
                          "characters from A-Z a-z 0-9 . _ -")
    seen: dict[str, str] = {}
    for env, name in [*named.items(), *(("KMQ_DELIVERIES_TOPIC", n) for n in s.lane_layout.names()[1:])]:
        if name in seen and seen[name] != env:
            raise ConfigError(f"{env} and {seen[name]} both name topic {name!r}: give each of kmq's "
                              "topics its own name")
        seen.setdefault(name, env)
    # (Lane topics end in .<number>, Faust's in -changelog or __leader: they cannot clash.)
    faust = fausts_topics(s.app_id)
    for env, name in named.items():
        if name in faust:
            raise ConfigError(f"{env}={name!r} is {faust[name]} of KMQ_APP_ID="
                              f"{s.app_id!r}: give {env} another name (or KMQ_APP_ID another value)")


def check_durability(s: Settings) -> None:
    """Values that must agree: replicas, retention against every wait, delivery timeout."""
    rf = s.effective_replication_factor
    if s.min_insync_replicas > rf:
        raise ConfigError(
            f"KMQ_MIN_INSYNC_REPLICAS={s.min_insync_replicas} is above the replication "
            f"factor {rf} (KMQ_REPLICATION_FACTOR): every acks=all write would fail; "
            f"set it to at most {rf}")
    # Redelivery reads a released, expired or held message back from the queue topic: a held
    # one comes back up to max_processing_s after it was handed out, if its consumer dies.
    # (A queue's own max_processing_s is not known here: docs/deployment.md.)
    waits = {"KMQ_MAX_DELAY_S": s.max_delay_s, "KMQ_VISIBILITY_TIMEOUT_S": s.visibility_timeout_s,
             "KMQ_MAX_PROCESSING_S": s.max_processing_s}
    # A held message is taken back a visibility timeout after its last keepalive.
    back_after_s = {**waits, "KMQ_MAX_PROCESSING_S": s.max_processing_s + s.visibility_timeout_s
                    if s.max_processing_s else 0}
    too_long = [name for name in waits if back_after_s[name] * 1000 >= s.queue_retention_ms]
    if too_long:
        def wait(name: str) -> str:  # what the retention must exceed, as compared
            if name == "KMQ_MAX_PROCESSING_S":
                return (f"KMQ_MAX_PROCESSING_S={s.max_processing_s:g} + KMQ_VISIBILITY_TIMEOUT_S="
                        f"{s.visibility_timeout_s:g} ({_span(back_after_s[name])})")
            return f"{name}={waits[name]:g} ({_span(waits[name])})"
        exceeded = " or ".join(wait(n) for n in too_long)
        raise ConfigError(
            f"KMQ_QUEUE_RETENTION_MS={s.queue_retention_ms} ({_span(s.queue_retention_ms / 1000)}) does not exceed "
            f"{exceeded}: a message redelivered after that long would have left the queue topic "
            "(dead-lettered as payload-expired); raise KMQ_QUEUE_RETENTION_MS well above it or "
            f"lower {' and '.join(too_long)}")
    if s.delivery_timeout_ms < REQUEST_TIMEOUT_MS:
        raise ConfigError(
            f"KMQ_DELIVERY_TIMEOUT_MS={s.delivery_timeout_ms} is below the producer "
            f"request timeout: give at least {REQUEST_TIMEOUT_MS}")


def _span(seconds: float) -> str:
    """Days from a day on, else seconds (days said 0.0 of 301 s against 330 s)."""
    return f"{seconds / 86_400:.1f} days" if seconds >= 86_400 else f"{seconds:g} s"

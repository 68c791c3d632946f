"""The Faust configuration of the tracker, derived from the one kmq :class:`~kmq.Settings`.

Durability and group timeouts per profile come from ``kmq.kafka.profiles`` (the
same place the SDK's and the tracker's librdkafka clients get theirs); this
module adds what only the Faust app has: the broker URLs, RocksDB storage,
the web server, and the SASL/SSL credentials built from ``kmq.kafka.security``.
"""

from __future__ import annotations

import socket
from typing import Any

from app import logs
from kmq.errors import ConfigError
from kmq.kafka import profiles
from kmq.kafka import security
from kmq.setting_values import is_wildcard
from kmq.settings import Settings

# RocksDB per table partition: Faust's defaults (2 GiB block cache, 3 x 64 MiB
# write buffers per DB) multiply by partitions x tables; the tracker's state
# is small per key, so bound it.
ROCKSDB_OPTIONS = {
    "block_cache_size": 32 * 1024 * 1024,
    "block_cache_compressed_size": 8 * 1024 * 1024,
    "write_buffer_size": 8 * 1024 * 1024,
    "max_write_buffer_number": 2,
}

def check_web_bind(s: Settings) -> None:
    """Refuse to listen on every interface with auth off (ConfigError naming both fixes).

    With auth off every view answers anyone: queue names, counts, dead letters'
    payloads. That is fine on loopback or one private address chosen on purpose,
    not on a wildcard that also takes whatever public interface the host has.
    """
    if is_wildcard(s.web_host) and not s.auth_on:
        raise ConfigError(
            f"KMQ_WEB_HOST={s.web_host!r} listens on every interface while KMQ_AUTH=off: anyone "
            "who reaches the port reads every queue and its dead letters. Set KMQ_AUTH=on with "
            "KMQ_ADMIN_TOKEN (16+ random characters), or bind one address: KMQ_WEB_HOST=127.0.0.1, "
            "or the container's own hostname on a private network (docker-compose.yml does)")


def faust_options(s: Settings) -> dict[str, Any]:
    """Keyword arguments for ``faust.App`` from kmq settings (refuses an open wildcard bind)."""
    check_web_bind(s)
    opts: dict[str, Any] = {
        "broker": ";".join(f"kafka://{h.strip()}" for h in s.bootstrap_servers.split(",")),
        "store": "rocksdb://",
        "datadir": s.data_dir,
        # web_bind is where we listen; web_host goes into the canonical URL
        # other workers use to reach this one (routed views).
        "web_bind": s.web_host,
        "web_host": advertised_web_host(s),
        "web_port": s.web_port,
        "topic_partitions": s.markers_partitions,
        "web_enabled": True,
        # Faust's own endpoints are unauthenticated: /table/... serves raw entries (delayed
        # sends hold their payloads there), /router/... and /graph/ the internals. kmq's views
        # route requests with app.router (external_topic_key_store), which needs none of them.
        "web_tables_enabled": False,
        "web_router_enabled": False,
        "web_graph_enabled": False,
        "worker_redirect_stdouts": False,
        **profiles.faust_options(s),
    }
    if s.log_format == "json":
        opts["logging_config"] = logs.logging_config()
    logs.quiet_spinner()
    credentials = _credentials(s)
    if credentials is not None:
        opts["broker_credentials"] = credentials
    return opts


def advertised_web_host(s: Settings) -> str:
    """The host in this worker's canonical URL: never a wildcard address."""
    if s.web_advertised_host:
        return s.web_advertised_host
    if is_wildcard(s.web_host):
        return socket.gethostname()
    return s.web_host


def _credentials(s: Settings) -> Any:
    """Faust credentials for the KMQ_* security settings (None for PLAINTEXT)."""
    import faust

    if security.protocol(s) == "PLAINTEXT":
        return None
    # None unless TLS: Faust picks SASL_SSL over SASL_PLAINTEXT by its presence.
    context = security.ssl_context(s)
    if security.uses_sasl(s):
        return faust.SASLCredentials(
            username=s.sasl_username, password=s.sasl_password,
            mechanism=s.sasl_mechanism.strip().upper(), ssl_context=context)
    return faust.SSLCredentials(context)

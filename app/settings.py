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
from kmq.kafka import profiles
from kmq.kafka import security
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

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def faust_options(s: Settings) -> dict[str, Any]:
    """Keyword arguments for ``faust.App`` from kmq settings."""
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
        # route requests with app.router (topic_route), which needs none of them.
        "web_tables_enabled": False,
        "web_router_enabled": False,
        "web_graph_enabled": False,
        "worker_redirect_stdouts": False,
        **profiles.faust_options(s),
    }
    if s.log_format == "json":
        opts["logging_config"] = logs.logging_config()
    credentials = _credentials(s)
    if credentials is not None:
        opts["broker_credentials"] = credentials
    return opts


def advertised_web_host(s: Settings) -> str:
    """The host in this worker's canonical URL: never a wildcard address."""
    if s.web_advertised_host:
        return s.web_advertised_host
    if s.web_host in WILDCARD_HOSTS:
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

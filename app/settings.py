"""The Faust configuration of the tracker, derived from the one kmq :class:`~kmq.Settings`.

Profile ``embedded`` (the Tansu dev broker, BROKER.md): short group
timeouts, because Tansu answers a join after about half the session
timeout; and one changelog record per produce batch, because Tansu's
ListOffsets reports a batch's base offset + 1 as the end and Faust's
recovery stops there (measured: 39,994 of 40,000 keys restored otherwise).
Profile ``production`` keeps Faust's durable defaults (acks=all).
"""

from __future__ import annotations

from typing import Any

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


def faust_options(s: Settings) -> dict[str, Any]:
    """Keyword arguments for ``faust.App`` from kmq settings."""
    opts: dict[str, Any] = {
        "broker": ";".join(f"kafka://{h.strip()}" for h in s.bootstrap_servers.split(",")),
        "store": "rocksdb://",
        "datadir": s.data_dir,
        "web_host": s.web_host,
        "web_bind": s.web_host,
        "web_port": s.web_port,
        "topic_partitions": s.markers_partitions,
        "topic_replication_factor": s.effective_replication_factor,
        "table_standby_replicas": 1,
        "consumer_auto_offset_reset": "earliest",
        "producer_acks": -1,
        "web_enabled": True,
        "worker_redirect_stdouts": False,
    }
    if s.security_protocol:
        opts["broker_credentials"] = _credentials(s)
    if s.embedded:
        opts.update(
            broker_session_timeout=6.0,
            broker_rebalance_timeout=6.0,
            broker_heartbeat_interval=1.0,
            producer_max_batch_size=1,
            broker_commit_interval=1.0,
        )
    return opts


def _credentials(s: Settings) -> Any:
    import ssl

    import faust

    context = ssl.create_default_context(cafile=s.ssl_cafile or None)
    if s.security_protocol.upper().startswith("SASL"):
        if s.sasl_mechanism.upper().startswith("SCRAM"):
            return faust.SASLCredentials(
                username=s.sasl_username, password=s.sasl_password,
                mechanism=s.sasl_mechanism.upper(), ssl_context=context)
        return faust.SASLCredentials(username=s.sasl_username, password=s.sasl_password,
                                     ssl_context=context)
    return faust.SSLCredentials(context)

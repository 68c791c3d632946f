"""The tracker's changelogged RocksDB table, co-partitioned with the markers topic.

One table holds in-flight range entries, scheduled sends (``kmq.protocol.entries``
codec) and the deadline index (keys ``D`` + big-endian deadline + entry key,
so RocksDB iterates them in time order and a tick costs O(due)). One table
means one changelog: after a crash the state is a prefix of one ordered log
(see ``kmq.protocol.store.Store``). Raw bytes keys and values: the changelog holds
exactly what ``kmq.protocol.entries`` encodes, and Spark decodes it with that module.
"""

from __future__ import annotations

from app import app, settings
from app.settings import ROCKSDB_OPTIONS
from kmq.kafka.broker_checks import changelog_topic_config
from kmq.setting_checks import TRACKER_TABLE  # its changelog's name is checked against kmq's topics

INDEX_VALUE = b"\x01"  # a present, non-null value (null is a changelog tombstone)

tracker_state = app.Table(
    TRACKER_TABLE, key_type=bytes, value_type=bytes, partitions=settings.markers_partitions,
    help="In-flight ranges (R...), scheduled sends (S...) and the deadline index (D...)",
    options=dict(ROCKSDB_OPTIONS),
    # The changelog is the state: as durable as kmq's own topics (min.insync.replicas), and
    # its tombstones kept as long as markers (a stopped worker's RocksDB must not outlive them).
    extra_topic_configs=changelog_topic_config(settings),
)

"""Changelog topics in Spark: decode, latest value per key, snapshots, the tracker's state.

A changelog is a table's write log: the latest record of a key is its value,
and a record with a null value (a tombstone) deletes the key. Two codecs:

- Faust's default (JSON keys and values; Record values carry
  ``"__faust": {"ns": ...}`` whose module part depends on how the worker
  was launched, so nothing here relies on it): :func:`decode_faust_json`.
- kmq's tracker changelog ``<app id>-tracker-changelog`` (raw bytes in the
  ``kmq.protocol.entries`` codec): :func:`tracker_entries` and :func:`inflight_state`.

:func:`membership_digest` recomputes, from the changelog, the per-partition
hash the tracker reports at ``GET /kmq/debug/state``, so the two can be
compared for the same moment.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kmq.errors import ConfigError
from kmq.protocol import entries as E
from kmq.spark.arrow import BINARY, INT, LONG, STRING, array_of, arrow_schema, struct

# In docs/spark.md's order: the entry, then where it came from.
TRACKER_ENTRY_SCHEMA = struct(
    ("kind", STRING), ("queue", STRING),
    ("queue_partition", INT), ("start", LONG), ("end", LONG), ("message_id", STRING),
    ("pending_count", LONG), ("pending", BINARY), ("started_ms", LONG), ("timeout_ms", LONG),
    ("next_deadline_ms", LONG), ("due_ms", LONG),
    ("groups", array_of(("deadline_ms", LONG), ("cause", STRING), ("reason", STRING),
                        ("count", LONG))),
    ("changelog_partition", INT), ("changelog_offset", LONG), ("key", BINARY), ("value", BINARY))
CODECS = ("raw", "faust-json", "tracker")
DIGEST_SCHEMA = struct(("changelog_partition", INT), ("ranges", LONG), ("scheduled", LONG),
                       ("pending", LONG), ("membership_sha256", STRING))


def tracker_changelog_topic(app_id: str) -> str:
    """The tracker's one changelog topic for ``KMQ_APP_ID``."""
    return f"{app_id}-tracker-changelog"


def latest_per_key(df: DataFrame, keys: tuple[str, ...] = ("topic", "key")) -> DataFrame:
    """The last record of each key (partition, then offset order) with tombstones applied.

    ``row_number() = 1`` over a window becomes a WindowGroupLimit in Spark's
    plan: the fastest of the methods we tried on millions of records.
    """
    order = Window.partitionBy(*keys).orderBy(F.col("partition").desc(), F.col("offset").desc())
    return (df.withColumn("_rank", F.row_number().over(order)).where(F.col("_rank") == 1)
            .drop("_rank").where(F.col("value").isNotNull()))


def json_text(col: str | Column) -> Column:
    """A UTF-8 JSON binary column as a string column."""
    return F.col(col).cast("string") if isinstance(col, str) else col.cast("string")


def decode_faust_json(df: DataFrame, value_schema: str | None = None,
                      key_schema: str | None = None) -> DataFrame:
    """Faust JSON changelog records with decoded columns added.

    ``key_json``/``value_json``: the raw JSON text; ``key_text``: a JSON
    string key unquoted (null for other keys); ``faust_ns``: a Record's
    namespace; ``key_data``/``value_data``: parsed with the given DDL schemas
    (``__faust`` and other unknown fields are ignored by ``from_json``).
    """
    out = (df.withColumn("key_json", json_text("key"))
           .withColumn("value_json", json_text("value"))
           .withColumn("key_text", F.get_json_object(
               F.concat(F.lit('{"k":'), F.col("key_json"), F.lit("}")), "$.k"))
           .withColumn("faust_ns", F.get_json_object("value_json", "$.__faust.ns")))
    if key_schema:
        out = out.withColumn("key_data", F.from_json("key_json", key_schema))
    if value_schema:
        out = out.withColumn("value_data", F.from_json("value_json", value_schema))
    return out


def snapshot(df: DataFrame, path: str, codec: str = "raw", value_schema: str | None = None,
             mode: str = "overwrite") -> int:
    """Write the current table state of changelog records ``df`` to Parquet at ``path``.

    ``codec``: ``raw`` (binary key/value), ``faust-json`` (adds decoded
    columns), ``tracker`` (kmq's in-flight state). Returns the rows written.
    """
    if codec not in CODECS:
        raise ConfigError(f"snapshot codec={codec!r} is not a codec: use one of {', '.join(CODECS)}")
    if codec == "tracker":
        state = inflight_state(df)
    else:
        state = latest_per_key(df)
        if codec == "faust-json":
            state = decode_faust_json(state, value_schema)
    state = state.cache()
    try:
        state.write.mode(mode).parquet(path)
        return state.count()
    finally:
        state.unpersist()


# -- kmq's tracker changelog ----------------------------------------------------

def _not_index_key(col: str = "key") -> Column:
    return F.substring(F.col(col), 1, 1) != F.lit(E.INDEX_PREFIX)


def inflight_state(changelog: DataFrame) -> DataFrame:
    """The tracker's in-flight ranges and scheduled sends, rebuilt from its changelog.

    One row per live entry (deadline-index keys are skipped), columns as in
    :data:`TRACKER_ENTRY_SCHEMA`.
    """
    live = latest_per_key(changelog.where(_not_index_key()))
    return tracker_entries(live.select("partition", "offset", "key", "value"))


def tracker_entries(records: DataFrame) -> DataFrame:
    """Decode tracker changelog records (partition, offset, key, value) into entry rows."""
    return records.mapInArrow(_decode_entries, TRACKER_ENTRY_SCHEMA)


def _pending_bytes(mask: int) -> bytes:
    return mask.to_bytes((mask.bit_length() + 7) // 8, "little")


def _decode_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        rows = []
        cols = batch.to_pydict()
        for part, off, key, value in zip(cols["partition"], cols["offset"], cols["key"],
                                         cols["value"]):
            if value is None or not (E.is_range_key(key) or E.is_schedule_key(key)):
                continue
            row = dict.fromkeys(("queue_partition", "start", "end", "message_id", "pending_count",
                                 "pending", "started_ms", "timeout_ms", "next_deadline_ms",
                                 "due_ms", "groups"))
            row.update(changelog_partition=part, key=key, changelog_offset=off, value=value)
            if E.is_range_key(key):
                r = E.decode_range_key(key)
                e = E.decode_inflight(value)
                pending = e.pending
                row.update(kind="range", queue=r.queue, queue_partition=r.partition,
                           start=r.start, end=r.end, pending_count=pending.bit_count(),
                           pending=_pending_bytes(pending), started_ms=e.started_ms,
                           timeout_ms=e.timeout_ms, next_deadline_ms=e.next_deadline_ms(),
                           groups=[{"deadline_ms": g.deadline_ms, "cause": g.cause.name.lower(),
                                    "reason": g.reason, "count": g.mask.bit_count()}
                                   for g in e.groups])
            else:
                queue, message_id = E.decode_schedule_key(key)
                s = E.decode_scheduled(value)
                row.update(kind="schedule", queue=queue, message_id=message_id, due_ms=s.due_ms,
                           next_deadline_ms=s.due_ms)
            rows.append(row)
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=_ENTRY_ARROW)


_ENTRY_ARROW = arrow_schema(TRACKER_ENTRY_SCHEMA)


def membership_digest(state: DataFrame, partitions: int | None = None) -> dict[int, dict]:
    """Per changelog partition, what ``GET /kmq/debug/state`` reports for the same state.

    The hash runs over the entries in RocksDB key order (bytewise), so rows
    are sorted by key within each changelog partition first. ``partitions``
    fills in empty partitions the changelog has no entry for.
    """
    n = max(1, partitions or 1)
    rows = (state.select("changelog_partition", "key", "kind", "pending", "pending_count", "value")
            .repartition(n, "changelog_partition")
            .sortWithinPartitions("changelog_partition", "key")
            .mapInArrow(_digest, DIGEST_SCHEMA).collect())
    out = {r.changelog_partition: {"ranges": r.ranges, "scheduled": r.scheduled,
                                   "pending": r.pending, "membership_sha256": r.membership_sha256}
           for r in rows}
    for p in range(partitions or 0):
        out.setdefault(p, {"ranges": 0, "scheduled": 0, "pending": 0,
                           "membership_sha256": hashlib.sha256().hexdigest()})
    return out


_DIGEST_ARROW = arrow_schema(DIGEST_SCHEMA)


def _digest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    acc: dict[int, list] = {}
    for batch in batches:
        cols = batch.to_pydict()
        for part, key, kind, pending, count, value in zip(
                cols["changelog_partition"], cols["key"], cols["kind"], cols["pending"],
                cols["pending_count"], cols["value"]):
            a = acc.setdefault(part, [hashlib.sha256(), 0, 0, 0])
            # What tables.store.partition_digest hashes: R key + pending mask, S key + value.
            if kind == "range":
                a[0].update(key + pending)
                a[1] += 1
                a[3] += count
            else:
                a[0].update(key + value)
                a[2] += 1
    if acc:
        yield pa.RecordBatch.from_pylist(
            [{"changelog_partition": p, "ranges": a[1], "scheduled": a[2], "pending": a[3],
              "membership_sha256": a[0].hexdigest()} for p, a in sorted(acc.items())],
            schema=_DIGEST_ARROW)

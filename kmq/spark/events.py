"""Records of kmq's topics as Spark columns: markers as events, queue and dead-letter headers.

Marker records are decoded with :mod:`kmq.protocol.marker_codec` (the one codec) inside
``mapInArrow``; a record that does not decode becomes one ``malformed``
event, so jobs count it and skip it. Range markers are exploded into one
event per offset, which is what per-message questions (how long did this
message take, was it ever acked) need. A shared queue's deliveries are ACQUIREs
(its dispatcher's), a group consumer's are STARTs: both are ``DELIVERY_EVENTS``.

Markers do not carry a message's ordered group (``kmq.group`` is a header of the
queue record): :func:`with_group` adds it to events or deliveries from the queue
records at their offsets.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kmq.protocol import envelope
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import QUEUE_NAME_RE
from kmq.errors import ConfigError, MarkerDecodeError
from kmq.spark.arrow import INT, LONG, STRING, arrow_schema, struct

EVENT_SCHEMA = struct(
    ("markers_partition", INT), ("markers_offset", LONG), ("seq", INT), ("ts_ms", LONG),
    ("event", STRING), ("queue", STRING), ("queue_partition", INT), ("offset", LONG),
    ("timeout_ms", LONG), ("delay_ms", LONG), ("reason", STRING), ("message_id", STRING),
    ("tick_ms", LONG))
_EVENT_ARROW = arrow_schema(EVENT_SCHEMA)

# Marker type -> event name; RELEASE with counted=False is "returned".
_NAMES = {M.Start: "start", M.Ack: "ack", M.Extend: "extend", M.Release: "release",
          M.Reject: "reject", M.Schedule: "schedule", M.Tick: "tick", M.Acquire: "acquire",
          M.Purge: "purge", M.Credit: "credit", M.Begin: "begin", M.Floor: "floor"}
SETTLE_EVENTS = ("ack", "release", "returned", "reject")
DELIVERY_EVENTS = ("start", "acquire")  # a group consumer's fetch, a dispatcher's hand-out


def marker_events(markers: DataFrame) -> DataFrame:
    """One row per (marker, offset) of the markers topic records ``markers``.

    Columns: see :data:`EVENT_SCHEMA`. ``ts_ms`` is the marker record's
    timestamp (broker time where the topic uses LogAppendTime); ``tick_ms`` a TICK's own
    time, the one the tracker takes deadlines at (``expiry.tick_time``; null for other events).
    """
    raw = markers.select(F.col("partition"), F.col("offset"),
                         F.unix_millis("timestamp").alias("ts_ms"), F.col("value"))
    return raw.mapInArrow(_explode, EVENT_SCHEMA)


def _explode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        cols = batch.to_pydict()
        out: dict[str, list] = {f.name: [] for f in _EVENT_ARROW}

        def add(part, off, seq, ts, event, queue=None, qpart=None, offsets=(None,),
                timeout_ms=None, delay_ms=None, reason=None, message_id=None, tick_ms=None):
            k = len(offsets)
            for name, v in (("markers_partition", part), ("markers_offset", off), ("seq", seq),
                            ("ts_ms", ts), ("event", event), ("queue", queue),
                            ("queue_partition", qpart), ("timeout_ms", timeout_ms),
                            ("delay_ms", delay_ms), ("reason", reason),
                            ("message_id", message_id), ("tick_ms", tick_ms)):
                out[name].extend([v] * k)
            out["offset"].extend(offsets)

        for part, off, ts, value in zip(cols["partition"], cols["offset"], cols["ts_ms"],
                                        cols["value"]):
            try:
                batch_markers = marker_codec.decode(value)
            except MarkerDecodeError as exc:
                add(part, off, 0, ts, "malformed", reason=exc.reason)
                continue
            for seq, m in enumerate(batch_markers):
                name = _NAMES[type(m)]
                if isinstance(m, M.Tick):  # its record's time is later than the one it runs at
                    add(part, off, seq, ts, name, tick_ms=m.now_ms)
                elif isinstance(m, M.Begin):
                    add(part, off, seq, ts, name)
                elif isinstance(m, (M.Purge, M.Credit)):
                    add(part, off, seq, ts, name, m.queue)
                elif isinstance(m, M.Floor):  # where a successor dispatcher reads from
                    add(part, off, seq, ts, name, m.queue, m.partition, (m.offset,))
                elif isinstance(m, M.Schedule):
                    add(part, off, seq, ts, name, m.queue, delay_ms=m.due_ms - ts,
                        message_id=m.message_id)
                else:
                    r = m.range
                    offsets = M.mask_offsets(r.start, m.mask)
                    if isinstance(m, (M.Start, M.Acquire)):
                        add(part, off, seq, ts, name, r.queue, r.partition, offsets,
                            timeout_ms=m.timeout_ms)
                    elif isinstance(m, M.Extend):
                        add(part, off, seq, ts, name, r.queue, r.partition, offsets,
                            timeout_ms=m.timeout_ms)
                    elif isinstance(m, M.Release):
                        add(part, off, seq, ts, "release" if m.counted else "returned", r.queue,
                            r.partition, offsets, delay_ms=m.delay_ms)
                    elif isinstance(m, M.Reject):
                        add(part, off, seq, ts, name, r.queue, r.partition, offsets,
                            reason=m.reason)
                    else:
                        add(part, off, seq, ts, name, r.queue, r.partition, offsets)
        if out["event"]:
            yield pa.RecordBatch.from_pydict(out, schema=_EVENT_ARROW)


def header(name: str, col: str = "headers") -> Column:
    """The value (binary) of the first header called ``name``, or null."""
    return F.get(F.filter(F.col(col), lambda h: h["key"] == F.lit(name)), 0)["value"]


def header_long(name: str) -> Column:
    """A header holding an ASCII decimal number, as a long (null if absent or not a number)."""
    return header(name).cast("string").try_cast("long")


def _need_headers(df: DataFrame, what: str) -> None:
    # Without it Spark's error is an unresolved column `headers` deep in a plan.
    if "headers" not in df.columns:
        raise ConfigError(f"{what} needs the headers column: read the topic with "
                          "includeHeaders=True (kafka_reader(..., includeHeaders=True))")


def queue_records(queue: DataFrame) -> DataFrame:
    """Queue-topic records (read with headers) with kmq's envelope decoded.

    ``message_id`` falls back to ``partition:offset`` for records a plain
    producer wrote (the id the tracker gives them on redelivery);
    ``deliveries`` counts deliveries before this record (absent: 0); ``group`` is the
    ordered message group (``kmq.group``, docs/ordering.md; null without one).
    """
    _need_headers(queue, "queue_records")
    return queue.select(
        F.col("key").cast("string").alias("queue"), F.col("partition").alias("queue_partition"),
        "offset", F.unix_millis("timestamp").alias("ts_ms"),
        F.coalesce(header(envelope.ID).cast("string"),
                   F.concat_ws(":", F.col("partition").cast("string"),
                               F.col("offset").cast("string"))).alias("message_id"),
        F.coalesce(header_long(envelope.DELIVERIES), F.lit(0)).alias("deliveries"),
        header_long(envelope.ENQUEUED_MS).alias("enqueued_ms"),
        header(envelope.GROUP).cast("string").alias("group"))


def with_group(df: DataFrame, records: DataFrame) -> DataFrame:
    """``df`` (events or deliveries: ``queue``, ``queue_partition``, ``offset``) with a
    ``group`` column: the ordered message group (``kmq.group``) of the queue record at that
    offset, from :func:`queue_records`; null for a record without one and for events of no
    queue record (TICK, CREDIT ...). A redelivered copy keeps its group, so every delivery of
    a message has it."""
    groups = records.select(F.col("queue").alias("_q"), F.col("queue_partition").alias("_p"),
                            F.col("offset").alias("_o"), F.col("group"))
    on = ((df["queue"] == groups["_q"]) & (df["queue_partition"] == groups["_p"])
          & (df["offset"] == groups["_o"]))
    return df.join(groups, on, "left").select(*[df[c] for c in df.columns], groups["group"])


MALFORMED_MARKERS_KEY = "!malformed-markers"
# The queue id rule for Spark's (Java's) regexes: Java's \z is Python's \Z (the very end).
QUEUE_ID_JAVA_RE = QUEUE_NAME_RE.pattern.removesuffix("\\Z") + "\\z"


def dead_letters(dlq: DataFrame) -> DataFrame:
    """Dead-letter records (read with headers) with their reason and history as columns.

    Records whose key is no queue id (malformed markers set aside there, key
    ``!malformed-markers``; another client's null, empty or made-up keys) and the
    control events of redrives and purges (header ``kmq.dlq.control``) are left
    out: they are no queue's messages (the tracker's views leave out the same).
    """
    _need_headers(dlq, "dead_letters")
    letters = F.col("key").cast("string").rlike(QUEUE_ID_JAVA_RE) & header(envelope.DLQ_CONTROL).isNull()
    return dlq.where(letters).select(
        F.col("key").cast("string").alias("queue"),
        header(envelope.ID).cast("string").alias("message_id"),
        header(envelope.DLQ_REASON).cast("string").alias("reason"),
        header(envelope.DLQ_DETAIL).cast("string").alias("detail"),
        header_long(envelope.DELIVERIES).alias("deliveries"),
        header_long(envelope.FIRST_DELIVERY_MS).alias("first_delivery_ms"),
        header_long(envelope.ENQUEUED_MS).alias("enqueued_ms"),
        header_long(envelope.DLQ_LAST_DELIVERY_MS).alias("last_delivery_ms"),
        header_long(envelope.DLQ_AT_MS).alias("at_ms"),
        header(envelope.SOURCE).cast("string").alias("source"),
        header(envelope.GROUP).cast("string").alias("group"))

"""The shipped report jobs, as functions over DataFrames (``kmq spark <job>`` runs them).

Inputs are DataFrames of Kafka records in the Kafka source's schema (the
queue and dead-letter topics read with ``includeHeaders``), so a job runs on
kmq's source, the official one, or records saved to Parquet alike.

A *delivery* is one START (or a dispatcher's ACQUIRE) of one offset: it ends with the first ACK,
RELEASE, REJECT or return after it, unless a TICK took it back at its deadline
first (``timed-out``; a settle after that is ``settled_late`` and counts for
nothing, as in the tracker); if none came, it timed out at its deadline or is
still in flight at ``as_of_ms`` (:mod:`kmq.spark.deliveries`).

=================  ============================================================
``deliveries``     one row per delivery with its outcome (:mod:`kmq.spark.deliveries`)
``percentiles``    processing time (START to ACK) per queue: p50/p90/p99/max
``rates``          redeliveries per queue and reason (of deliveries) and
                   dead letters per queue and reason (of messages)
``never_acked``    messages no delivery of which was acked, with what became
                   of them
``overdue``        in-flight offsets and scheduled sends past their deadline
                   in the tracker's state (the tracker is behind or stuck)
``inflight``       the tracker's in-flight state rebuilt from its changelog
=================  ============================================================
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kmq.protocol.outcomes import Outcome
# The jobs' input, importable from here as before.
from kmq.spark.deliveries import deliveries  # noqa: F401

REDELIVERY_REASONS = ("timed-out", "released", "returned")


def percentiles(dels: DataFrame, accuracy: int = 10_000) -> DataFrame:
    """Processing time (START to ACK, ms) of acked deliveries per queue (a late ACK is none)."""
    acked = dels.where(F.col("outcome") == Outcome.ACKED.value)
    q = F.percentile_approx("processing_ms", [0.5, 0.9, 0.99], accuracy)
    return (acked.groupBy("queue")
            .agg(F.count("*").alias("acked"), q.alias("_q"), F.max("processing_ms").alias("max_ms"),
                 F.avg("processing_ms").alias("mean_ms"))
            .select("queue", "acked", F.col("_q")[0].alias("p50_ms"), F.col("_q")[1].alias("p90_ms"),
                    F.col("_q")[2].alias("p99_ms"), "max_ms", "mean_ms")
            .orderBy("queue"))


def rates(dels: DataFrame, dead: DataFrame | None = None,
          records: DataFrame | None = None) -> DataFrame:
    """Redelivery and dead-letter counts and rates per queue and reason.

    Columns: queue, kind (``redelivery`` / ``dead-letter``), reason, count,
    total, rate. Redeliveries are deliveries that ended without an ack or
    reject (timed-out, released, returned), out of the queue's deliveries; a
    delivery settled late timed out.
    Dead letters (:func:`kmq.spark.events.dead_letters`) come per
    ``kmq.dlq.reason``, out of the queue's messages (first-time records of
    :func:`kmq.spark.events.queue_records`; null without ``records``).
    """
    per_queue = dels.groupBy("queue").agg(F.count("*").alias("total"))
    redo = (dels.where(F.col("outcome").isin(*REDELIVERY_REASONS))
            .groupBy("queue", F.col("outcome").alias("reason")).agg(F.count("*").alias("count"))
            .join(per_queue, "queue")
            .select("queue", F.lit("redelivery").alias("kind"), "reason", "count", "total"))
    out = redo
    if dead is not None:
        dl = dead.groupBy("queue", "reason").agg(F.count("*").alias("count"))
        if records is not None:
            messages = (records.where(F.col("deliveries") == 0).groupBy("queue")
                        .agg(F.countDistinct("message_id").alias("total")))
            dl = dl.join(messages, "queue", "left")
        else:
            dl = dl.withColumn("total", F.lit(None).cast("long"))
        out = out.unionByName(dl.select("queue", F.lit("dead-letter").alias("kind"), "reason",
                                        "count", "total"))
    return (out.withColumn("rate", F.col("count") / F.col("total"))
            .orderBy("queue", "kind", "reason"))


def dead_letter_summary(dead: DataFrame) -> DataFrame:
    """Dead letters per queue and reason: count, attempts, age (dead-lettered minus enqueued)."""
    age = F.col("at_ms") - F.coalesce("enqueued_ms", "first_delivery_ms")
    q = F.percentile_approx(age, [0.5, 0.99], 10_000)
    return (dead.groupBy("queue", "reason")
            .agg(F.count("*").alias("count"), F.avg("deliveries").alias("mean_deliveries"),
                 F.max("deliveries").alias("max_deliveries"), q.alias("_age"))
            .select("queue", "reason", "count", "mean_deliveries", "max_deliveries",
                    F.col("_age")[0].alias("p50_age_ms"), F.col("_age")[1].alias("p99_age_ms"))
            .orderBy("queue", "reason"))


def never_acked(dels: DataFrame, records: DataFrame, dead: DataFrame | None = None) -> DataFrame:
    """Messages none of whose deliveries was acked, and what became of them.

    An ACK that came after the tracker took its delivery back (``settled_late``) is
    no ack. One row per message id: queue, message_id, copies (queue records: the
    first and every redelivery), deliveries (STARTs), last_outcome of its
    newest delivery (``queued`` when its newest copy was never fetched),
    dead_letter_reason (when ``dead`` is given), first_ms.
    """
    joined = records.join(dels, ["queue", "queue_partition", "offset"], "left")
    newest = Window.partitionBy("queue", "message_id").orderBy(
        F.col("ts_ms").desc(), F.col("offset").desc(), F.col("delivery").desc_nulls_last())
    last = (joined.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1)
            .select("queue", "message_id",
                    F.coalesce("outcome", F.lit("queued")).alias("last_outcome")))
    per_msg = (joined.groupBy("queue", "message_id")
               .agg(F.countDistinct("queue_partition", "offset").alias("copies"),
                    F.count("delivery").alias("deliveries"),
                    F.max(F.when(F.col("outcome") == Outcome.ACKED.value, 1).otherwise(0)).alias("_acked"),
                    F.min("ts_ms").alias("first_ms"))
               .where(F.col("_acked") == 0).drop("_acked")
               .join(last, ["queue", "message_id"]))
    if dead is not None:
        reasons = dead.groupBy("queue", "message_id").agg(F.first("reason").alias("dead_letter_reason"))
        per_msg = per_msg.join(reasons, ["queue", "message_id"], "left")
    # The columns in docs/spark.md's order.
    columns = ["queue", "message_id", "copies", "deliveries", "last_outcome",
               *(["dead_letter_reason"] if dead is not None else []), "first_ms"]
    return per_msg.select(*columns).orderBy("queue", "message_id")


def overdue(state: DataFrame, as_of_ms: int, grace_ms: int = 0) -> DataFrame:
    """In-flight offsets and scheduled sends whose deadline passed ``grace_ms`` before ``as_of_ms``.

    ``state`` is :func:`kmq.spark.changelog.inflight_state`. Columns: queue,
    queue_partition, start, end, message_id, cause, reason, count,
    deadline_ms, overdue_ms.
    """
    limit = F.lit(as_of_ms - grace_ms)
    ranges = (state.where(F.col("kind") == "range")
              .select("queue", "queue_partition", "start", "end", F.explode("groups").alias("g"))
              .where(F.col("g.deadline_ms") < limit)
              .select("queue", "queue_partition", "start", "end",
                      F.lit(None).cast("string").alias("message_id"),
                      F.col("g.cause").alias("cause"), F.col("g.reason").alias("reason"),
                      F.col("g.count").alias("count"), F.col("g.deadline_ms").alias("deadline_ms")))
    sends = (state.where((F.col("kind") == "schedule") & (F.col("due_ms") < limit))
             .select("queue", F.lit(None).cast("int").alias("queue_partition"),
                     F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
                     "message_id", F.lit("scheduled").alias("cause"), F.lit("").alias("reason"),
                     F.lit(1).cast("long").alias("count"), F.col("due_ms").alias("deadline_ms")))
    return (ranges.unionByName(sends)
            .withColumn("overdue_ms", F.lit(as_of_ms) - F.col("deadline_ms"))
            .orderBy("deadline_ms", "queue", "start"))


def inflight_summary(state: DataFrame) -> DataFrame:
    """Per queue: in-flight ranges, pending offsets, scheduled sends, earliest deadline."""
    return (state.groupBy("queue")
            .agg(F.sum(F.when(F.col("kind") == "range", 1).otherwise(0)).alias("ranges"),
                 F.coalesce(F.sum("pending_count"), F.lit(0)).alias("pending"),
                 F.sum(F.when(F.col("kind") == "schedule", 1).otherwise(0)).alias("scheduled"),
                 F.min("next_deadline_ms").alias("next_deadline_ms"))
            .orderBy("queue"))

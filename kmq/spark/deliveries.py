"""Deliveries from marker events, each ended the way the tracker ended it.

A *delivery* is one START (or a dispatcher's ACQUIRE) of one offset. Its outcome is
the first ACK, RELEASE, REJECT or return after it, unless the tracker took it back
first: then it is ``timed-out``, and a settle that came afterwards (``settled_late``)
is not its outcome. With neither, it timed out if its deadline passed at ``as_of_ms``,
else it is in flight.

"Took it back first" is the tracker's rule, read from the same log (kmq/protocol):

- A START or ACQUIRE sets ``deadline = now + timeout`` and an EXTEND moves it to
  ``now + timeout``, later or earlier, while the offset waits on its consumer
  (``state.PartitionState._start``, ``entries.InFlight.move`` from ``Cause.TIMEOUT``).
  ``now`` is the partition clock (``clock.PartitionClock.observe``): the marker's
  append time, or the newest time it saw before (TICKs' included) if that is later.
- A TICK takes what is due at its own time, ``tick.now_ms`` (``expiry.tick_time``):
  deadlines at or before it (``deadlines._expiries``); the tracker republishes or
  dead-letters those offsets and forgets them (``Deadlines.settle``).
- A settle read after that finds the offsets gone: ``late`` (``PartitionState._not_held``),
  nothing changes. The markers agent reads a partition's records in log order
  (``agents/track_markers.py``), so "after" is (``markers_offset``, ``seq``) within the
  markers partition: the log decides, not the clock.

What the log does not show, so the tracker may still differ: its clock reads a START
a processing lag after its append time (its deadline is that much later: milliseconds
while it keeps up); a TICK whose due list was cut (``KMQ_REDELIVER_BATCH_LIMIT``) or
whose redelivery failed leaves the rest to a later TICK; a timed-out message that waits
out its queue's backoff stays held (``Cause.DEFERRED``), so an ACK within that wait
counts as acked there.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kmq.protocol.outcomes import Outcome
from kmq.spark.events import DELIVERY_EVENTS, SETTLE_EVENTS

_OUTCOMES = {"ack": Outcome.ACKED.value, "release": Outcome.RELEASED.value, "returned": Outcome.RETURNED.value,
             "reject": Outcome.REJECTED.value}
_LOG_ORDER = ("markers_offset", "seq")
_OFFSET = ("queue", "queue_partition", "offset")


def deliveries(events: DataFrame, as_of_ms: int | None = None) -> DataFrame:
    """One row per delivery of an offset, from :func:`kmq.spark.events.marker_events`.

    Columns: queue, queue_partition, offset, delivery (1, 2, ... per offset),
    start_ms, deadline_ms, outcome (acked released returned rejected
    timed-out in-flight), settled_ms, processing_ms (acked only), reason,
    settled_late (a settle came after the tracker took the delivery back: it
    is ``timed-out``, and the settle counts for nothing, as the tracker's ``late``).
    ``as_of_ms`` (default: the newest marker's time) separates timed-out
    from in-flight where no TICK in the log decided it.
    """
    if as_of_ms is None:
        newest = events.agg(F.max("ts_ms")).first()[0]
        as_of_ms = newest if newest is not None else 0
    tick = F.col("event") == "tick"
    # The tracker's clock at each event: the newest TICK time read before it in its
    # markers partition, and how many TICKs that was (a deadline passes only at a TICK
    # read after it was set, even with a timeout of 0).
    log = Window.partitionBy("markers_partition").orderBy(*_LOG_ORDER).rowsBetween(Window.unboundedPreceding, 0)
    clocked = (events.where(F.col("offset").isNotNull() | tick)
               .withColumn("_clock_ms", F.max(F.when(tick, F.col("tick_ms"))).over(log))
               .withColumn("_ticks", F.count(F.when(tick, 1)).over(log))
               .where(F.col("offset").isNotNull()))
    position = F.struct("markers_partition", *_LOG_ORDER).alias("at")
    per_offset = Window.partitionBy(*_OFFSET).orderBy(
        "markers_partition", *_LOG_ORDER).rowsBetween(Window.unboundedPreceding, 0)
    begins = F.col("event").isin(*DELIVERY_EVENTS)
    sets_deadline = begins | (F.col("event") == "extend")
    numbered = (clocked.withColumn("delivery", F.sum(F.when(begins, 1).otherwise(0)).over(per_offset))
                .where(F.col("delivery") >= 1)
                .withColumn("_deadline_ms", F.when(sets_deadline, F.greatest("ts_ms", "_clock_ms")
                                                   + F.col("timeout_ms"))))
    # The deadline in force just before each event: the last START/ACQUIRE/EXTEND before it.
    before = Window.partitionBy(*_OFFSET, "delivery").orderBy(
        "markers_partition", *_LOG_ORDER).rowsBetween(Window.unboundedPreceding, -1)
    in_force = F.last(F.when(sets_deadline, F.struct(F.col("_deadline_ms").alias("deadline_ms"),
                                                     F.col("_ticks").alias("ticks"))), ignorenulls=True)
    timed = numbered.withColumn("_in_force", in_force.over(before))
    # A TICK read before this event (and after the deadline was set) reached the deadline.
    taken_back = ((F.col("_clock_ms") >= F.col("_in_force.deadline_ms"))
                  & (F.col("_ticks") > F.col("_in_force.ticks")))
    in_force_ms = F.col("_in_force.deadline_ms").alias("deadline_ms")
    grouped = (timed.groupBy(*_OFFSET, "delivery")
               .agg(F.min(F.when(begins, F.col("ts_ms"))).alias("start_ms"),
                    F.min(F.when(taken_back, F.struct(position, in_force_ms))).alias("lapse"),
                    F.min(F.when(F.col("event").isin(*SETTLE_EVENTS), F.struct(
                        position, "event", "ts_ms", "reason", in_force_ms))).alias("settle"),
                    F.max(F.when(sets_deadline, F.struct(position, F.col("_deadline_ms").alias("deadline_ms"))))
                    .alias("last_set")))
    lapse, settle = F.col("lapse"), F.col("settle")
    on_time = settle.isNotNull() & (lapse.isNull() | (F.col("settle.at") < F.col("lapse.at")))
    deadline = (F.when(on_time, F.col("settle.deadline_ms")).when(lapse.isNotNull(), F.col("lapse.deadline_ms"))
                .otherwise(F.col("last_set.deadline_ms")))
    outcome_of = F.create_map(*[F.lit(x) for kv in _OUTCOMES.items() for x in kv])
    return grouped.select(
        *_OFFSET, "delivery", "start_ms", deadline.alias("deadline_ms"),
        F.when(on_time, outcome_of[F.col("settle.event")])
        .when(lapse.isNotNull() | (deadline <= F.lit(as_of_ms)), F.lit("timed-out"))
        .otherwise(F.lit("in-flight")).alias("outcome"),
        F.when(on_time, F.col("settle.ts_ms")).alias("settled_ms"),
        F.when(on_time & (F.col("settle.event") == "ack"), F.col("settle.ts_ms") - F.col("start_ms"))
        .alias("processing_ms"),
        F.when(on_time, F.col("settle.reason")).alias("reason"),
        (lapse.isNotNull() & settle.isNotNull() & ~on_time).alias("settled_late"))

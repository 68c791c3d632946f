"""Prometheus metrics of a tracker worker: ``GET /metrics`` (``prometheus_client`` text format).

Each worker reports the queues of the markers partitions it owns (scrape
every worker; ``sum by (queue)`` joins them). Label cardinality is bounded:
the ``KMQ_METRICS_TOP_QUEUES`` busiest queues of a worker get their own
``queue`` label, all others are summed under ``queue="~other"``. The
selection is kept for :data:`RESELECT_S` seconds so series do not flap; when
a queue moves in or out of it, ``~other``'s counters can go down, which
Prometheus treats as a counter reset. With auth on, the admin token is
needed (metrics name every queue).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from web.queue_stats import RATE_EVENTS
from agents.runtime import runtime
from app import app, settings
from web.api import caller_of, denied
from web.read_models import scanner, stats
from kmq.errors import PermissionDeniedError
from kmq.stats.gc_clock import process_clock
from kmq.stats.rates import OTHER
from kmq.ops.tenancy import Caller, require_admin

RESELECT_S = 300.0
GAUGES = {
    "depth": "Records waiting in the queue (enqueued, not yet fetched by a consumer)",
    "in_flight": "Messages delivered and not yet acked, redelivered or dead-lettered",
    "scheduled": "Delayed sends held by the tracker until due",
    "dead_letters": "Dead letters of the queue on the dead-letter topic (not redriven or purged)",
    "consumers": "Live consumers of a shared queue (asking its dispatcher for work; 0 in partition mode)",
}


class TopQueues:
    """The busiest queues, re-chosen every ``RESELECT_S`` seconds."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.chosen: set[str] = set()
        self._at = 0.0

    def select(self, rows: list[dict[str, Any]], now: float) -> set[str]:
        names = {r["queue"] for r in rows}
        if now - self._at >= RESELECT_S or not self.chosen <= names or (
                len(self.chosen) < self.size and len(names) > len(self.chosen)):
            def activity(r: dict[str, Any]) -> int:
                return (sum(r[f"{e}_per_min"] for e in RATE_EVENTS) + (r["depth"] or 0)
                        + r["in_flight"] + r["scheduled"] + r["dead_letters"])
            ranked = sorted(rows, key=lambda r: (-activity(r), r["queue"]))
            self.chosen = {r["queue"] for r in ranked[:self.size]}
            self._at = now
        return self.chosen


class TrackerCollector:
    """Builds every metric at scrape time from the worker's in-memory stats."""

    def __init__(self) -> None:
        self.top = TopQueues(settings.metrics_top_queues)

    def collect(self) -> Iterator[Any]:
        now = time.time()
        rows = stats.rows(Caller(admin=True), now)
        chosen = self.top.select(rows, now)
        label = lambda q: q if q in chosen else OTHER  # noqa: E731
        gauges = {name: GaugeMetricFamily(f"kmq_queue_{name}", doc, labels=["queue"])
                  for name, doc in GAUGES.items()}
        sums: dict[str, dict[str, float]] = {name: {} for name in GAUGES}
        oldest: dict[str, float] = {}
        events: dict[tuple[str, str], int] = {}
        for r in rows:
            q = label(r["queue"])
            for name in GAUGES:
                sums[name][q] = sums[name].get(q, 0) + (r[name] or 0)
            if r["oldest_in_flight_age_s"] is not None:
                oldest[q] = max(oldest.get(q, 0.0), r["oldest_in_flight_age_s"])
            for event, n in stats.totals(r["queue"]).items():
                events[(q, event)] = events.get((q, event), 0) + n
        for name, fam in gauges.items():
            for q, v in sorted(sums[name].items()):
                fam.add_metric([q], v)
            yield fam
        age = GaugeMetricFamily("kmq_queue_oldest_in_flight_age_seconds",
                                "Age of the oldest in-flight delivery", labels=["queue"])
        for q, v in sorted(oldest.items()):
            age.add_metric([q], v)
        yield age
        total = CounterMetricFamily(
            "kmq_queue_messages", "Messages per queue and event since this worker owns the queue "
            "(sent: records appended to the queue topic, incl. redeliveries; received: fetched)",
            labels=["queue", "event"])
        for (q, event), n in sorted(events.items()):
            total.add_metric([q, event], n)
        yield total
        yield from _groups(label)
        other = GaugeMetricFamily("kmq_metrics_other_queues",
                                  "Queues summed under queue=\"~other\" (past KMQ_METRICS_TOP_QUEUES)")
        other.add_metric([], sum(1 for r in rows if r["queue"] not in chosen))
        yield other
        yield from self._tracker(now)

    def _tracker(self, now: float) -> Iterator[Any]:
        lag = GaugeMetricFamily("kmq_tracker_lag_records",
                                "Markers not yet processed per owned markers partition",
                                labels=["partition"])
        consumer = app.consumer
        owned = runtime().owned
        for p in sorted(owned):
            tp = _tp(settings.markers_topic, p)
            try:
                high = consumer.highwater(tp)
                read = consumer._read_offset.get(tp)  # Faust keeps the last offset it read
            except Exception:
                continue
            if high is not None:
                lag.add_metric([str(p)], max(0, high - ((read + 1) if read is not None else 0)))
        yield lag
        parts = GaugeMetricFamily("kmq_tracker_partitions", "Markers partitions this worker owns")
        parts.add_metric([], len(owned))
        yield parts
        malformed = CounterMetricFamily("kmq_tracker_malformed_markers",
                                        "Marker records set aside as malformed")
        malformed.add_metric([], sum(p.malformed for p in owned.values()))
        yield malformed
        aside = CounterMetricFamily("kmq_tracker_set_aside",
                                    "Markers and records counted but not acted on, by reason",
                                    labels=["reason"])
        for reason, n in owned.set_aside().items():
            aside.add_metric([reason], n)
        yield aside
        gc_s = CounterMetricFamily("kmq_tracker_gc_seconds", "Seconds in Python's garbage collector, "
                                   "by generation (KMQ_TRACKER_GC_THRESHOLD)", labels=["generation"])
        for g, seconds in enumerate(process_clock().seconds):
            gc_s.add_metric([str(g)], seconds)
        yield gc_s
        scans = CounterMetricFamily("kmq_tracker_depth_scans", "Depth scan passes of this worker")
        scans.add_metric([], scanner.passes)
        yield scans
        held = GaugeMetricFamily("kmq_dispatcher_held_bytes", "Value and header bytes of queue "
                                 "records the shared-queue dispatcher keeps read and not handed out")
        held.add_metric([], runtime().dispatcher.held_bytes())
        yield held


def _groups(label) -> Iterator[Any]:
    """Ordered queues' groups (docs/ordering.md), from this worker's dispatcher."""
    fams = {"groups_waiting": GaugeMetricFamily(
                "kmq_queue_groups_waiting", "Ordered groups with messages waiting and none in flight",
                labels=["queue"]),
            "groups_in_flight": GaugeMetricFamily(
                "kmq_queue_groups_in_flight", "Ordered groups with their head in flight or on its way back",
                labels=["queue"]),
            "groups_held": GaugeMetricFamily(
                "kmq_queue_groups_held", "Ordered groups held by a dead-lettered message until it is "
                "redriven (dead_letter_head hold)", labels=["queue"])}
    age = GaugeMetricFamily("kmq_queue_group_head_age_seconds", "Age of the oldest group head",
                            labels=["queue"])
    sums: dict[str, dict[str, float]] = {name: {} for name in fams}
    ages: dict[str, float] = {}
    for queue, g in runtime().dispatcher.group_gauges().items():
        q = label(queue)
        for name in fams:
            sums[name][q] = sums[name].get(q, 0) + g[name]
        ages[q] = max(ages.get(q, 0.0), g["oldest_head_age_ms"] / 1000)
    for name, fam in fams.items():
        for q, v in sorted(sums[name].items()):
            fam.add_metric([q], v)
        yield fam
    for q, v in sorted(ages.items()):
        age.add_metric([q], v)
    yield age


def _tp(topic: str, partition: int) -> Any:
    from faust.types import TP
    return TP(topic, partition)


registry = CollectorRegistry(auto_describe=False)
registry.register(TrackerCollector())


@app.page("/metrics")
async def metrics(web, request):
    """Prometheus text format; needs the admin token when auth is on."""
    try:
        require_admin(caller_of(request), "/metrics")
    except PermissionDeniedError as exc:
        return denied(web, exc)
    scanner.want()
    return web.bytes(generate_latest(registry), content_type=CONTENT_TYPE_LATEST.split(";")[0])

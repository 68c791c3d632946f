"""This worker's one queue scanner and one queue stats, built over its runtime: the
read models that the API, the health view and the metrics all read."""

from __future__ import annotations

from web.queue_scan import QueueScanner
from web.queue_stats import QueueStats
from agents.runtime import runtime
from app import settings
from kmq.ops.queues_topic import QueueConfigs


def queue_configs() -> QueueConfigs | None:
    """The queue settings view, or None until it started."""
    return runtime().configs_if_started()  # None until started: never blocks a view


scanner = QueueScanner(
    settings,
    owned=lambda: set(runtime().owned),
    known_queues=lambda: set(stats.queues()),
    started_upto=lambda q, p: (lambda part: None if part is None else part.gauges.started_upto.get((q, p)))(
        stats.owner_part(q)),
    config=lambda q: stats.config(q),
    refresh_s=settings.stats_refresh_ms / 1000, scan_limit=settings.stats_scan_limit)
stats = QueueStats(runtime().owned, scanner, queue_configs, settings.markers_partitions,
                   consumers=lambda: runtime().dispatcher.snapshot()["consumers"],
                   default_dispatch=settings.dispatch)

"""The kmq redelivery tracker, a Faust service: ``faust -A app worker -l info``.

Configured only by ``KMQ_*`` environment variables (see ``kmq.settings``).
The worker creates kmq's topics at start (idempotent) and serves the web
views on ``KMQ_WEB_HOST:KMQ_WEB_PORT``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

# `faust -A app` imports this package with the working directory on the path
# only for that import; its siblings (agents/, tables/) are imported later.
# Keep the service root on the path (appended: a duplicate entry is harmless).
sys.path.append(str(Path(__file__).resolve().parent.parent))

import faust  # noqa: E402

from app import consumer_tuning, data_dir  # noqa: E402
from app.stop_watchdog import StopWatchdog, TrackerWorker  # noqa: E402
from app.settings import faust_options  # noqa: E402
from kmq import writable_dir  # noqa: E402
from kmq.errors import ConfigError  # noqa: E402
from kmq.kafka import acls, broker_checks  # noqa: E402
from kmq.kafka.admin import ensure_topics  # noqa: E402
from kmq.ops.queues_writes import publish_auth  # noqa: E402
from kmq.settings import Settings  # noqa: E402
from kmq.stats.gc_clock import process_clock, set_young_threshold  # noqa: E402

log = logging.getLogger("kmq.tracker")

try:
    settings = Settings.from_env()
    options = faust_options(settings)  # refuses an open wildcard bind, loads the TLS files
except ConfigError as exc:
    # Faust wraps an import's ValueError in "Cannot import 'app'" and a traceback:
    # say ours in one line (the variable and the fix) and stop, before any broker.
    sys.exit(f"error: {exc}")
found = writable_dir.problem(settings.data_dir)
if found:  # Faust's mkdir at start: a NotADirectoryError traceback naming no setting, then a hang
    sys.exit(f"error: KMQ_DATA_DIR={settings.data_dir} {found}: give a directory path this worker can write")
consumer_tuning.apply(settings)
# The dispatcher holds tens of thousands of records: at Python's default threshold the
# collector took a quarter of the tracker's CPU in a shared drain (docs/shared-queues.md).
set_young_threshold(settings.tracker_gc_threshold)
process_clock()  # counts from here: /kmq/health and /metrics show it


class TrackerApp(faust.App):
    """faust.App that makes sure kmq's topics exist before anything subscribes."""

    # How long the changelog keeps tombstones, from the start-up checks: a table partition
    # last written longer ago is rebuilt when it opens (app.consumer_tuning).
    tombstones_kept_ms: int | None = None

    async def on_first_start(self) -> None:
        await super().on_first_start()
        loop = asyncio.get_running_loop()
        created = await loop.run_in_executor(None, ensure_topics, settings)
        if created:
            log.info("created topics %s", ", ".join(created))
        # Broker settings kmq depends on (offsets retention, transaction bound, changelog
        # tombstones): a ConfigError here stops the worker with the fix.
        report = await loop.run_in_executor(
            None, broker_checks.check_at_start, settings, acls.changelog_topic(settings))
        for warning in report.warnings:
            log.warning("%s", warning)
        self.tombstones_kept_ms = report.tombstones_kept_ms
        # Before any table opens (tables start after this): drop tables too old to resume.
        data_dir.rebuild_if_stale(settings.data_dir, time.time(), report.tombstones_kept_ms)
        data_dir.rebuild_if_unclean(settings.data_dir)  # also takes the clean-stop mark away
        data_dir.stamp(settings.data_dir)
        await loop.run_in_executor(None, publish_auth, settings)


    async def on_stop(self) -> None:
        await super().on_stop()
        # Faust has let its streams run empty, stopped the tables and flushed its producer:
        # every table write is in the changelog, so the data dir may be reused as it is.
        # (Not in on_shutdown: a worker stopped by a signal closes its loop before that.)
        data_dir.mark_clean_stop(settings.data_dir)


TrackerWorker.watchdog = StopWatchdog(settings.stop_timeout_s)
app = TrackerApp(
    settings.app_id,
    autodiscover=["agents", "web", "app.commands"],
    origin="app",
    Worker=TrackerWorker,  # a stop on a signal ends within KMQ_STOP_TIMEOUT_S
    **options,
)


@app.timer(interval=data_dir.STAMP_INTERVAL_S)
async def stamp_data_dir() -> None:
    """Mark the data dir as in use (a data dir unused for too long is rebuilt at start)."""
    data_dir.stamp(settings.data_dir)

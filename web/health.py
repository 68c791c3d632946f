"""A tracker worker's start-up of its views, and its open health views.

- ``GET /kmq/health``: liveness and what this worker owns (always open: no queue
  names or counts).
- ``GET /kmq/ready``: 200 once this worker can answer routed requests, else 503.

The queue views are :mod:`web.api`, which imports this module.
"""

from __future__ import annotations

import asyncio
import os
import logging

from web.read_models import scanner
from agents.runtime import runtime
from app import app, settings
from app.startup import until_done
from app.unreadable import unreadable_batches
from kmq.kafka.patient_reader import raised_fetch_waits
from kmq.stats.gc_clock import process_clock

log = logging.getLogger("kmq.tracker.api")

_state = {"routes_warm": False, "configs": False}


@app.task
async def start_views() -> None:
    """Load the queue settings view, warm the producer's metadata for routing, start the scanner."""
    await until_done("the views' queue settings", lambda: runtime().config("warm-up"))
    _state["configs"] = True
    while not _state["routes_warm"]:
        try:
            # The router hashes with the producer's metadata: without it a routed
            # view answers 500 (FAUST.md). Faust has no public way to ask for it.
            await app.producer._ensure_producer().partitions_for(settings.markers_topic)
            _state["routes_warm"] = app.producer.key_partition(settings.markers_topic, b"x") is not None
        except Exception as exc:  # not connected yet
            log.debug("warming metadata: %s", exc)
        if not _state["routes_warm"]:
            await asyncio.sleep(0.2)
    scanner.start()


@app.page("/kmq/health")
async def health(web, request):
    """Liveness and what this worker owns (open: no queue names or counts)."""
    owned = runtime().owned
    return web.json({"status": "ok", "pid": os.getpid(), "partitions": sorted(owned), "ready": _ready(), "waiting_for": _waiting_for(),
                     "malformed_markers": sum(p.malformed for p in owned.values()),
                     "set_aside": owned.set_aside(),
                     "replayed_markers": sum(p.replayed for p in owned.values()),
                     "unreadable_batches": unreadable_batches().as_json(),
                     "unreadable_configs": _unreadable_configs(),
                     "marker_gaps": owned.gaps.as_json(),
                     "fetch_waits_raised": raised_fetch_waits(),
                     "gc": process_clock().as_json(),
                     "scanner": {"active": scanner.active, "passes": scanner.passes,
                                 "dlq_passes": scanner.dead_letters.passes,
                                 "dlq_records_read": scanner.dead_letters.records_read,
                                 "dlq_records_of_no_queue": scanner.dead_letters.records_of_no_queue,
                                 "unreadable_batches": scanner.skips.batches,
                                 "error": scanner.last_error}})


def _unreadable_configs() -> int:
    """Records of the queues topic no decoder could read (kmq.ops.queues_topic), ignored."""
    configs = runtime().configs_if_started()
    return 0 if configs is None else configs.unreadable


def _waiting_for() -> list[str]:
    """What this worker still waits for before it is ready (empty once it is)."""
    return [what for what, done in (("queue-settings", _state["configs"]), ("routing-metadata", _state["routes_warm"]),
                                    ("table-recovery", app.tables.recovery.completed.is_set())) if not done]


def _ready() -> bool:
    return not _waiting_for()


@app.page("/kmq/ready")
async def ready(web, request):
    """200 when this worker answers routed requests (metadata warm, tables recovered), else 503."""
    ok = _ready()
    return web.json({"ready": ok, "routes_warm": _state["routes_warm"]}, status=200 if ok else 503)

"""Web views of the tracker (JSON)."""

from __future__ import annotations

from agents.track_markers import owned
from app import app, settings


@app.page("/kmq/health")
async def health(web, request):
    """Liveness and what this worker owns."""
    return web.json({"status": "ok", "partitions": sorted(owned),
                     "malformed_markers": sum(p.malformed for p in owned.values())})


@app.page("/kmq/stats")
async def stats(web, request):
    """Counters per queue from the partitions this worker owns (since it started)."""
    per_queue: dict[str, dict[str, int]] = {}
    for (queue, what), n in owned.totals().items():
        per_queue.setdefault(queue, {})[what] = n
    return web.json({"queues": per_queue,
                     "malformed_markers": sum(p.malformed for p in owned.values())})


@app.page("/kmq/debug/state")
async def state_digest(web, request):
    """Per owned partition: entry counts and a hash of the tables (recovery checks)."""
    from tables.store import partition_digest
    return web.json({str(p): partition_digest(p) for p in sorted(owned)})

"""Web views of the tracker for checks (JSON): counters since start, table digests.

The API proper (queues, health, readiness) is web/api.py; the dashboard web/dashboard.py;
Prometheus metrics web/metrics.py.
"""

from __future__ import annotations

from agents.track_markers import dispatcher, owned
from app import app


@app.page("/kmq/stats")
async def stats(web, request):
    """Counters per queue from the partitions this worker owns (since it started).

    Names every queue: with auth on it needs the admin token.
    """
    from web.api import caller_of, denied
    from kmq.errors import PermissionDeniedError
    from kmq.ops.tenancy import require_admin
    try:
        require_admin(caller_of(request), "/kmq/stats")
    except PermissionDeniedError as exc:
        return denied(web, exc)
    per_queue: dict[str, dict[str, int]] = {}
    for (queue, what), n in owned.totals().items():
        per_queue.setdefault(queue, {})[what] = n
    return web.json({"queues": per_queue,
                     "malformed_markers": sum(p.malformed for p in owned.values()),
                     "dispatcher": dispatcher.snapshot()})


@app.page("/kmq/debug/state")
async def state_digest(web, request):
    """Per owned partition: entry counts and a hash of the tables (recovery checks)."""
    from tables.store import partition_digest
    return web.json({str(p): partition_digest(p) for p in sorted(owned)})


@app.page("/kmq/debug/ticks")
async def tick_costs(web, request):
    """Recent ticks that had work, per owned partition: [messages due, seconds]."""
    return web.json({str(p): [list(t) for t in part.tick_costs] for p, part in sorted(owned.items())})

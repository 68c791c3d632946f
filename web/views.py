"""Web views of the tracker for checks (JSON): counters since start, table digests.

The API proper (queues) is web/api.py, health and readiness web/health.py; the dashboard
web/dashboard.py; Prometheus metrics web/metrics.py.
"""

from __future__ import annotations

from agents.runtime import runtime
from app import app


@app.page("/kmq/stats")
async def stats(web, request):
    """Counters per queue from the partitions this worker owns (since it started).

    Names every queue: with auth on it needs the admin token.
    """
    refused = _admin_only(web, request, "/kmq/stats")
    if refused is not None:
        return refused
    rt = runtime()
    per_queue: dict[str, dict[str, int]] = {}
    for (queue, what), n in rt.owned.totals().items():
        per_queue.setdefault(queue, {})[what] = n
    return web.json({"queues": per_queue,
                     "malformed_markers": sum(p.malformed for p in rt.owned.values()),
                     "dispatcher": rt.dispatcher.snapshot(),
                     "groups": rt.dispatcher.group_gauges()})  # ordered queues (docs/ordering.md)


def _admin_only(web, request, what: str):
    """None for the admin (anyone with auth off), else the 403 answer."""
    from web.api import caller_of, denied
    from kmq.errors import PermissionDeniedError
    from kmq.ops.tenancy import require_admin
    try:
        require_admin(caller_of(request), what)
    except PermissionDeniedError as exc:
        return denied(web, exc)
    return None


@app.page("/kmq/debug/state")
async def state_digest(web, request):
    """Per owned partition: entry counts and a hash of the tables (recovery checks).

    Admin only, and off the event loop: it decodes every entry of the owned tables.
    """
    refused = _admin_only(web, request, "/kmq/debug/state")
    if refused is not None:
        return refused
    import asyncio

    from tables.store import partition_digest
    parts = sorted(runtime().owned)
    digests = await asyncio.get_running_loop().run_in_executor(
        None, lambda: {str(p): partition_digest(p) for p in parts})
    return web.json(digests)


@app.page("/kmq/debug/ticks")
async def tick_costs(web, request):
    """Recent ticks that had work, per owned partition: [messages due, seconds] (admin only)."""
    refused = _admin_only(web, request, "/kmq/debug/ticks")
    if refused is not None:
        return refused
    return web.json({str(p): [list(t) for t in part.tick_costs] for p, part in sorted(runtime().owned.items())})

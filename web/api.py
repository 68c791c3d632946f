"""The JSON API of the tracker workers: the queue list and one queue's detail.

- ``GET /kmq/api/queues?limit=&offset=&sort=&order=&prefix=``: every queue of
  the deployment, gathered from every worker (each knows the queues of the
  markers partitions it owns), sorted and paginated.
- ``GET /kmq/api/queues/{queue}``: one queue, answered by the worker that owns
  its markers partition (another worker forwards the request there).
- ``GET /kmq/api/local/queues``: this worker's part of the list, its first
  ``offset + limit`` rows in the requested order (workers call each other).

With auth on, every queue view needs ``Authorization: Bearer <token>`` (the
admin's or the queue's tenant's): 403 otherwise. A tenant sees only its own
queues; another tenant's queue is refused exactly like a missing one. A
request forwarded to another worker carries no bearer token, only a
credential for that one worker, path and query, valid for seconds
(:mod:`web.peer_auth`, sent by :mod:`web.peer_requests`); the local endpoint
accepts nothing else. Health and readiness (open) are :mod:`web.health`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from web import peer_auth
# Importing web.health registers its start-up task and views wherever the API is imported.
from web.health import health, ready, start_views  # noqa: F401
from web.paging import MAX_LIMIT, _first_rows, _merged, _page_params, _peer_query, detail_params_error  # noqa: F401
from web.peer_requests import forward_to_owner, peer_failure, peer_page, peer_urls, this_worker_url
from web.queue_stats import totals_of
from web.read_models import queue_configs, scanner, stats
from agents.runtime import runtime
from app import app, settings
from kmq.protocol import envelope
from kmq.errors import PermissionDeniedError
from kmq.ops.tenancy import Caller, admin_token_is, identify, require_queue_access

DETAIL_RANGES = 100
DETAIL_DEAD_LETTERS = 20
DELIVERY_COUNT_OFFSETS = 500  # records read back per detail request for delivery counts


# -- helpers ----------------------------------------------------------------------------

def bearer_token(request: Any) -> str | None:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def caller_of(request: Any, *, peer_only: bool = False) -> Caller:
    """Who asks (raises PermissionDeniedError). Who is admin is this worker's own
    KMQ_AUTH and KMQ_ADMIN_TOKEN, never the queues topic's ``!auth`` record (anyone who
    may write that topic could make their own token admin there). A request another
    worker forwarded speaks for its caller with a peer credential made for this worker
    and this request; ``peer_only`` views accept nothing else (never a bearer token)."""
    if not settings.auth_on:
        return Caller(admin=True)
    credential = request.headers.get(peer_auth.HEADER)
    if credential is not None:
        return peer_auth.verify(settings.admin_token, credential, url=this_worker_url(),
                                path_query=peer_auth.target(request.path, request.query.items()),
                                now_s=time.time())
    if peer_only:
        raise PermissionDeniedError(f"this view answers other tracker workers only ({peer_auth.HEADER})")
    configs = queue_configs()
    token = bearer_token(request)
    if token is None:  # say what an HTTP caller sends (identify() names the SDK's KMQ_TOKEN)
        raise PermissionDeniedError("this kmq deployment requires a token: send the header "
                                    "Authorization: Bearer <token> (the admin's or the queue's tenant's)")
    # Compared with the worker's own token: no slow hash per request.
    return identify(token, auth_on=settings.auth_on,
                    is_admin=admin_token_is(settings.admin_token),
                    tenants=configs.tenants() if configs is not None else {})


def denied(web: Any, exc: PermissionDeniedError) -> Any:
    return web.json({"error": str(exc)}, status=403)


def _local_page(caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    scanner.want()
    now = time.time()
    rows = [r for r in stats.rows(caller, now) if r["queue"].startswith(p["prefix"])]
    names = {r["queue"] for r in rows}
    history = stats.history(lambda q: q in names, now)
    return {"queues": _first_rows(rows, p), "total": len(rows), "totals": totals_of(rows),
            "history": {str(k): dict(v) for k, v in history.items()}, "scanned": scanner.fresh}


def _history_json(history: dict[int, Any]) -> dict[str, Any]:
    starts = sorted(history)
    fields = ("sent", "received", "acked", "redelivered", "dead_lettered", "released", "rejected")
    return {"bucket_s": owned_bucket_s(), "starts": starts,
            "series": {f: [int(history[s].get(f, 0)) for s in starts] for f in fields}}


def owned_bucket_s() -> int:
    return next((p.rates.bucket_s for p in runtime().owned.values()), 10)


# -- views ------------------------------------------------------------------------------

def _list_request(web: Any, request: Any, peer_only: bool = False) -> tuple[Caller, dict[str, Any]] | Any:
    """(caller, page parameters) of a list request, or the 403/400 answer to give instead."""
    try:
        return caller_of(request, peer_only=peer_only), _page_params(request)
    except PermissionDeniedError as exc:
        return denied(web, exc)
    except ValueError as exc:
        return web.json({"error": str(exc)}, status=400)


@app.page("/kmq/api/local/queues")
async def local_queues(web, request):
    """This worker's queues (the list view gathers these from every worker)."""
    asked = _list_request(web, request, peer_only=True)
    if not isinstance(asked, tuple):
        return asked
    return web.json(_local_page(*asked))


@app.page("/kmq/api/queues")
async def queues(web, request):
    """Every queue the caller may see, from every worker: sorted, paginated, with totals."""
    asked = _list_request(web, request)
    if not isinstance(asked, tuple):
        return asked
    caller, p = asked
    pages = [_local_page(caller, p)]
    peers = peer_urls()
    errors = []
    results = await asyncio.gather(*(peer_page(u, caller, p) for u in peers), return_exceptions=True)
    for url, res in zip(peers, results):
        if isinstance(res, BaseException):
            errors.append(f"{url}: {peer_failure(res)}")
        else:
            pages.append(res)
    page = _merged(pages, p)
    return web.json({
        "queues": page["queues"],
        "total": page["total"], "limit": p["limit"], "offset": p["offset"],
        "sort": p["sort"], "order": p["order"], "totals": page["totals"], "history": _history_json(page["history"]),
        "workers": 1 + len(peers), "partial": bool(errors), "errors": errors,
        "scanned": all(pg.get("scanned", True) for pg in pages),
    })


@app.page("/kmq/api/queues/{queue}")
async def queue_detail(web, request, queue: str):
    """One queue: its row, settings, counts since start, in-flight ranges, recent dead letters."""
    try:
        caller = caller_of(request)
        unknown = detail_params_error(request.query)
        if unknown:
            return web.json({"error": unknown}, status=400)
        forwarded = await forward_to_owner(web, request, caller, queue)
        if forwarded is not None:
            return forwarded
        cfg = stats.config(queue)
        require_queue_access(caller, queue, stats.tenant_of(queue))
    except PermissionDeniedError as exc:
        return denied(web, exc)
    scanner.want()
    now = time.time()
    row = stats.row(queue, now)
    if row is None:
        return web.json({"error": f"queue {queue!r}: not found"}, status=404)
    # Read with the row, before the await below: the agent may count more meanwhile, and
    # since_start must not run ahead of the row's per-minute counts (late 1, late_per_min 0).
    since_start = stats.totals(queue)
    n_ranges, ranges = stats.ranges(queue, DETAIL_RANGES)
    await _add_delivery_counts(ranges)
    # From the scanner's incremental fold: a request reads nothing of the dead-letter topic.
    dead = scanner.dead_letters.of(queue, DETAIL_DEAD_LETTERS) or {
        "count": None, "recent": [], "error": "not scanned yet"}
    return web.json({
        **row, "owner": str(app.conf.canonical_url),
        "config": {"visibility_timeout_s": cfg.visibility_s(settings),
                   "max_deliveries": cfg.deliveries(settings), "spread": cfg.spread,
                   "dead_letter": cfg.dead_letter, "backoff": cfg.backoff.to_dict(),
                   "dispatch": cfg.dispatch_mode(settings), "ordering": cfg.ordering,
                   "dead_letter_head": cfg.dead_letter_head, "dedup_window_s": cfg.dedup_window_s},
        "since_start": since_start,
        "groups": _groups_of(queue, cfg.ordering),
        "in_flight_ranges": ranges, "in_flight_range_count": n_ranges,
        "dead_letters_detail": dead,
        "history": _history_json(stats.history(lambda q: q == queue, now)),
        "scanned": scanner.fresh,
    })


def _groups_of(queue: str, ordering: str) -> dict[str, int] | None:
    """An ordered queue's groups (docs/ordering.md): waiting, in flight, held, oldest head age (s);
    None for an unordered queue. This worker owns the queue's markers partition, so its
    dispatcher is the one that holds the groups."""
    if ordering != "group":
        return None
    g = runtime().dispatcher.group_gauges().get(queue, {})
    return {"waiting": g.get("groups_waiting", 0), "in_flight": g.get("groups_in_flight", 0),
            "held": g.get("groups_held", 0),
            "oldest_head_age_s": g.get("oldest_head_age_ms", 0) / 1000}


async def _add_delivery_counts(ranges: list[dict[str, Any]]) -> None:
    """Delivery count histogram per range, from the records' headers (the tracker does not store it)."""
    budget = DELIVERY_COUNT_OFFSETS
    for r in ranges:
        offsets = sorted(o for g in r["groups"] for o in g["offsets"])[:budget]
        r["delivery_counts"] = None
        if not offsets:
            continue
        budget -= len(offsets)
        read = await runtime().redeliverer.read_payloads(r["partition"], offsets)
        counts: dict[str, int] = {}
        for rec in read.records.values():
            n = envelope.int_header(envelope.split(rec.headers)[0], envelope.DELIVERIES, 0) + 1
            counts[str(n)] = counts.get(str(n), 0) + 1
        r["delivery_counts"] = counts
        if budget <= 0:
            break
    for r in ranges:
        r.setdefault("delivery_counts", None)
        for g in r["groups"]:
            g["offsets"] = g["offsets"][:50]

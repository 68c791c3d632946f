"""The JSON API of the tracker workers: queues, one queue's detail, health and readiness.

- ``GET /kmq/health``: liveness and what this worker owns (always open).
- ``GET /kmq/ready``: 200 once this worker can answer routed requests, else 503.
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
(:mod:`web.peer_auth`); the local endpoint accepts nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from web import peer_auth
from web.queue_scan import QueueScanner
from web.paging import MAX_LIMIT, _first_rows, _merged, _page_params, _peer_query  # noqa: F401
from web.queue_stats import QueueStats, totals_of
from agents.runtime import runtime
from app import app, settings
from app.startup import until_done
from app.topics import markers_topic
from app.unreadable import unreadable_batches
from kmq.protocol import envelope
from kmq.errors import KmqError, PermissionDeniedError
from kmq.kafka.patient_reader import raised_fetch_waits
from kmq.ops.queues_topic import QueueConfigs
from kmq.stats.gc_clock import process_clock
from kmq.ops.tenancy import Caller, admin_token_is, identify, require_queue_access

log = logging.getLogger("kmq.tracker.api")

DETAIL_RANGES = 100
DETAIL_DEAD_LETTERS = 20
DELIVERY_COUNT_OFFSETS = 500  # records read back per detail request for delivery counts
PEER_TIMEOUT_S = 10.0
FORWARDED_HEADER = "X-Kmq-Forwarded"  # set on requests one worker sends another


def _configs() -> QueueConfigs | None:
    return runtime().configs_if_started()  # None until started: never blocks a view


scanner = QueueScanner(
    settings,
    owned=lambda: set(runtime().owned),
    known_queues=lambda: set(stats.queues()),
    started_upto=lambda q, p: (lambda part: None if part is None else part.gauges.started_upto.get((q, p)))(
        stats.owner_part(q)),
    config=lambda q: stats.config(q),
    refresh_s=settings.stats_refresh_ms / 1000, scan_limit=settings.stats_scan_limit)
stats = QueueStats(runtime().owned, scanner, _configs, settings.markers_partitions,
                   consumers=lambda: runtime().dispatcher.snapshot()["consumers"],
                   default_dispatch=settings.dispatch)
_state = {"routes_warm": False, "configs": False}


# -- start-up -------------------------------------------------------------------------

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


# -- helpers ----------------------------------------------------------------------------

def bearer_token(request: Any) -> str | None:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def _me() -> str:
    return str(app.conf.canonical_url).rstrip("/")


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
        return peer_auth.verify(settings.admin_token, credential, url=_me(),
                                path_query=peer_auth.target(request.path, request.query.items()),
                                now_s=time.time())
    if peer_only:
        raise PermissionDeniedError(f"this view answers other tracker workers only ({peer_auth.HEADER})")
    configs = _configs()
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


def _peers() -> list[str]:
    """Web URLs of the other workers that own markers partitions."""
    me = _me()
    urls = []
    for url, topics in app.router.external_topics_metadata().items():
        if topics.get(settings.markers_topic) and str(url).rstrip("/") != me:
            urls.append(str(url).rstrip("/"))
    return sorted(urls)


def _peer_headers(caller: Caller, url: str, path: str, query: dict[str, str]) -> dict[str, str]:
    """A credential for exactly this request (never the caller's bearer token)."""
    headers = {FORWARDED_HEADER: "1"}
    if settings.auth_on:
        headers[peer_auth.HEADER] = peer_auth.sign(settings.admin_token, url=url, caller=caller, now_s=time.time(),
                                                   path_query=peer_auth.target(path, query.items()))
    return headers


async def _peer_page(url: str, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    params = _peer_query(p)
    path = "/kmq/api/local/queues"
    async with app.http_client.get(f"{url}{path}", params=params, timeout=PEER_TIMEOUT_S,
                                   headers=_peer_headers(caller, url, path, params)) as resp:
        if resp.status != 200:
            raise KmqError(f"{url} answered {resp.status}")
        return await resp.json()


# -- views ------------------------------------------------------------------------------

@app.page("/kmq/health")
async def health(web, request):
    """Liveness and what this worker owns (open: no queue names or counts)."""
    owned = runtime().owned
    return web.json({"status": "ok", "partitions": sorted(owned), "ready": _ready(), "waiting_for": _waiting_for(),
                     "malformed_markers": sum(p.malformed for p in owned.values()),
                     "set_aside": owned.set_aside(),
                     "replayed_markers": sum(p.replayed for p in owned.values()),
                     "unreadable_batches": unreadable_batches().as_json(),
                     "marker_gaps": owned.gaps.as_json(),
                     "fetch_waits_raised": raised_fetch_waits(),
                     "gc": process_clock().as_json(),
                     "scanner": {"active": scanner.active, "passes": scanner.passes,
                                 "dlq_passes": scanner.dead_letters.passes,
                                 "dlq_records_read": scanner.dead_letters.records_read,
                                 "unreadable_batches": scanner.skips.batches,
                                 "error": scanner.last_error}})


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
    peers = _peers()
    errors = []
    results = await asyncio.gather(*(_peer_page(u, caller, p) for u in peers), return_exceptions=True)
    for url, res in zip(peers, results):
        if isinstance(res, BaseException):
            errors.append(f"{url}: {res}")
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


async def _forward_to_owner(web: Any, request: Any, caller: Caller, queue: str) -> Any | None:
    """The owner's answer when another worker owns ``queue``'s markers partition, else None.

    Like Faust's ``topic_route``, which forwarded every header, bearer token included."""
    if FORWARDED_HEADER in request.headers or peer_auth.HEADER in request.headers:
        return None  # forwarded once already: answer here, never bounce between workers
    try:
        owner = str(app.router.external_topic_key_store(markers_topic, queue)).rstrip("/")
    except KeyError:
        return web.json({"error": "no worker owns this queue's markers partition yet"}, status=503)
    if owner == _me():
        return None
    query = dict(request.query.items())
    try:
        async with app.http_client.get(owner + request.path, params=query, timeout=PEER_TIMEOUT_S,
                                       headers=_peer_headers(caller, owner, request.path, query)) as resp:
            return web.text(await resp.text(), content_type=resp.content_type, status=resp.status)
    except Exception as exc:  # unreachable or slow (aiohttp's errors, a timeout): say which worker
        return web.json({"error": f"the owning worker {owner} did not answer: {exc!r}"}, status=502)


@app.page("/kmq/api/queues/{queue}")
async def queue_detail(web, request, queue: str):
    """One queue: its row, settings, counts since start, in-flight ranges, recent dead letters."""
    try:
        caller = caller_of(request)
        forwarded = await _forward_to_owner(web, request, caller, queue)
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
    """An ordered queue's groups (docs/ordering.md): waiting, in flight, oldest head age (s);
    None for an unordered queue. This worker owns the queue's markers partition, so its
    dispatcher is the one that holds the groups."""
    if ordering != "group":
        return None
    g = runtime().dispatcher.group_gauges().get(queue, {})
    return {"waiting": g.get("groups_waiting", 0), "in_flight": g.get("groups_in_flight", 0),
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

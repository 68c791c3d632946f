"""A page of the queue list (``/kmq/api/queues``), pure: its parameters, each worker's part
and the merge of the parts (docs/web.md). The views in :mod:`web.api` call these."""

from __future__ import annotations

from typing import Any

from kmq.stats.rates import merge_histories
from web.queue_stats import SORT_FIELDS, sort_rows

MAX_LIMIT = 1000  # rows of a page, for every caller; a worker's part is at most offset + this
PARAMETERS = ("limit", "offset", "sort", "order", "prefix")  # of the list; anything else is a 400


def _whole(q: Any, name: str, default: int, least: int) -> int:
    raw = q.get(name)
    if raw is None:
        return default
    # ASCII digits only: int() also took "+5", " 5", "5_0" (50) and other scripts' digits.
    value = int(raw) if raw.isascii() and raw.isdigit() else None
    if value is None or value < least:
        raise ValueError(f"{name}={raw!r}: give a whole number of at least {least}")
    return value


def detail_params_error(query: Any) -> str | None:
    """A queue's detail takes no parameters: what to say of the first one given (None: none);
    it answered 200 as if they were not there, while the list refuses unknown ones."""
    name = next(iter(query), None)
    return None if name is None else f"{name}={query.get(name)!r}: unknown parameter; a queue's detail takes none"


def _page_params(request: Any) -> dict[str, Any]:
    q = request.query
    unknown = sorted(set(q) - set(PARAMETERS))
    if unknown:  # a misspelt one (sort_by=depth) would be answered as if it were not there
        raise ValueError(f"{unknown[0]}={q.get(unknown[0])!r}: unknown parameter; "
                         f"use {', '.join(PARAMETERS)}")
    getall = getattr(q, "getall", None)  # aiohttp's query; a plain dict holds one value a name
    repeated = [n for n in PARAMETERS if getall is not None and len(getall(n, ())) > 1]
    if repeated:  # ?limit=1&limit=500 was answered with the first, the other dropped
        raise ValueError(f"{repeated[0]} given {len(getall(repeated[0]))} times: give it once")
    limit = min(MAX_LIMIT, _whole(q, "limit", 100, 1))  # more than a page: a page (docs/web.md)
    offset = _whole(q, "offset", 0, 0)
    sort = q.get("sort", "queue")
    if sort not in SORT_FIELDS:
        raise ValueError(f"sort={sort!r}: use one of {', '.join(SORT_FIELDS)}")
    order = q.get("order", "asc" if sort == "queue" else "desc")
    if order not in ("asc", "desc"):
        raise ValueError(f"order={order!r}: use asc or desc")
    return {"limit": limit, "offset": offset, "sort": sort, "order": order,
            "prefix": q.get("prefix", "")}


def _first_rows(rows: list[dict[str, Any]], p: dict[str, Any]) -> list[dict[str, Any]]:
    """A worker's part of the page ``p``: its rows in the requested order, the first offset + limit.

    Every row of the merged page is among the first offset + limit of the worker that owns it,
    so these parts are all the merge needs, at any offset. The part is never longer than the
    worker's own list, and limit stays at most MAX_LIMIT."""
    return sort_rows(rows, p["sort"], p["order"] == "desc")[:p["offset"] + p["limit"]]


def _merged(pages: list[dict[str, Any]], p: dict[str, Any]) -> dict[str, Any]:
    """The page ``p`` of every worker's parts (:func:`_first_rows`): rows, total, totals, history."""
    rows = sort_rows([r for pg in pages for r in pg["queues"]], p["sort"], p["order"] == "desc")
    totals: dict[str, int] = {}
    for pg in pages:
        for k, v in pg["totals"].items():
            totals[k] = totals.get(k, 0) + v
    return {"queues": rows[p["offset"]:p["offset"] + p["limit"]], "total": sum(pg["total"] for pg in pages),
            "totals": totals,
            "history": merge_histories({int(k): v for k, v in pg["history"].items()} for pg in pages)}


def _peer_query(p: dict[str, Any]) -> dict[str, str]:
    """What a worker asks each peer for, for the page ``p``: the same page. The peer answers
    with its first offset + limit rows (:func:`_first_rows`). Asking for ``limit=offset+limit``
    instead met the peer's MAX_LIMIT: pages past the 1,000th row lost rows."""
    return {"limit": str(p["limit"]), "offset": str(p["offset"]), "sort": p["sort"], "order": p["order"],
            "prefix": p["prefix"]}

"""Requests one tracker worker sends another: its part of the queue list, and a queue's
request forwarded to the worker that owns the queue's markers partition.

Each carries a credential for exactly that worker, path and query, valid for
seconds (:mod:`web.peer_auth`), never the caller's bearer token.
"""

from __future__ import annotations

import time
from typing import Any

from web import peer_auth
from web.paging import _peer_query
from app import app, settings
from app.topics import markers_topic
from kmq.errors import KmqError
from kmq.ops.tenancy import Caller

PEER_TIMEOUT_S = 10.0
FORWARDED_HEADER = "X-Kmq-Forwarded"  # set on requests one worker sends another


def peer_failure(exc: BaseException) -> str:
    """What went wrong asking a peer, never empty (a timeout's str() is "": the queue list
    said ``"errors": ["http://...: "]``)."""
    if isinstance(exc, TimeoutError):  # asyncio's too (an alias since Python 3.11)
        return f"did not answer within {PEER_TIMEOUT_S:g} s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def this_worker_url() -> str:
    """This worker's own web URL (its canonical URL, no trailing slash)."""
    return str(app.conf.canonical_url).rstrip("/")


def peer_urls() -> list[str]:
    """Web URLs of the other workers that own markers partitions."""
    me = this_worker_url()
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


async def peer_page(url: str, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """The worker at ``url``'s part of the queue list for the page parameters ``p``."""
    params = _peer_query(p)
    path = "/kmq/api/local/queues"
    async with app.http_client.get(f"{url}{path}", params=params, timeout=PEER_TIMEOUT_S,
                                   headers=_peer_headers(caller, url, path, params)) as resp:
        if resp.status != 200:
            raise KmqError(f"{url} answered {resp.status}")
        return await resp.json()


async def forward_to_owner(web: Any, request: Any, caller: Caller, queue: str) -> Any | None:
    """The owner's answer when another worker owns ``queue``'s markers partition, else None.

    Like Faust's ``topic_route``, which forwarded every header, bearer token included."""
    if FORWARDED_HEADER in request.headers or peer_auth.HEADER in request.headers:
        return None  # forwarded once already: answer here, never bounce between workers
    try:
        owner = str(app.router.external_topic_key_store(markers_topic, queue)).rstrip("/")
    except KeyError:
        return web.json({"error": "no worker owns this queue's markers partition yet"}, status=503)
    if owner == this_worker_url():
        return None
    query = dict(request.query.items())
    try:
        async with app.http_client.get(owner + request.path, params=query, timeout=PEER_TIMEOUT_S,
                                       headers=_peer_headers(caller, owner, request.path, query)) as resp:
            return web.text(await resp.text(), content_type=resp.content_type, status=resp.status)
    except Exception as exc:  # unreachable or slow (aiohttp's errors, a timeout): say which worker
        return web.json({"error": f"the owning worker {owner} did not answer: {peer_failure(exc)}"}, status=502)

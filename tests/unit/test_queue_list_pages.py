"""The queue list's pages, gathered from several workers, are the pages of one sorted list at any offset.

Each worker answers its part as ``/kmq/api/local/queues`` would (the query the asking worker
sends, parsed by the peer's own ``_page_params``); no broker and no HTTP."""

from types import SimpleNamespace

import pytest

from web import api
from web.queue_stats import TOTAL_FIELDS, sort_rows, totals_of


def request(**query: str) -> SimpleNamespace:
    return SimpleNamespace(query=query)


def row(queue: str, depth: int) -> dict:
    return {**dict.fromkeys(TOTAL_FIELDS, 0), "queue": queue, "depth": depth}


def part(rows: list[dict], p: dict) -> dict:
    """One worker's answer to the page parameters ``p`` (what ``_local_page`` returns)."""
    return {"queues": api._first_rows(rows, p), "total": len(rows), "totals": totals_of(rows), "history": {}}


def gathered_page(workers: list[list[dict]], asker: int, query: dict[str, str]) -> dict:
    """The page worker ``asker`` answers: its own part, and each peer's part for the query it sends."""
    p = api._page_params(request(**query))
    peer_p = api._page_params(request(**api._peer_query(p)))
    parts = [part(rows, p if i == asker else peer_p) for i, rows in enumerate(workers)]
    return api._merged(parts, p)


# 2,500 queues, most on one worker: a deep page is drawn almost wholly from it.
BIG = [row(f"q{i:05d}", depth=i % 37) for i in range(0, 2500) if i % 10]
SMALL = [row(f"q{i:05d}", depth=i % 37) for i in range(0, 2500, 10)]


@pytest.mark.parametrize("asker", [0, 1])
@pytest.mark.parametrize("sort, order", [("queue", "asc"), ("queue", "desc"), ("depth", "desc"), ("depth", "asc")])
@pytest.mark.parametrize("offset, limit", [(0, 100), (990, 100), (2000, 100), (1500, 1000), (2450, 100)])
def test_a_page_of_several_workers_is_the_page_of_one_sorted_list(asker, sort, order, offset, limit):
    query = {"offset": str(offset), "limit": str(limit), "sort": sort, "order": order}
    page = gathered_page([BIG, SMALL], asker, query)
    everything = sort_rows(BIG + SMALL, sort, order == "desc")
    assert [r["queue"] for r in page["queues"]] == [r["queue"] for r in everything[offset:offset + limit]]
    assert page["total"] == 2500
    assert page["totals"]["depth"] == sum(r["depth"] for r in everything)


def test_the_page_limit_still_binds_every_caller():
    # Given a caller asking for more than a page, peers included
    p = api._page_params(request(limit="5000", offset="2000"))
    # Then the page is cut to MAX_LIMIT, and a peer's part to offset + MAX_LIMIT rows
    assert p["limit"] == api.MAX_LIMIT
    peer_p = api._page_params(request(**api._peer_query(p)))
    assert peer_p["limit"] == api.MAX_LIMIT
    many = [row(f"q{i:05d}", depth=0) for i in range(5000)]
    assert len(api._first_rows(many, peer_p)) == 2000 + api.MAX_LIMIT
    # and never more rows than the worker has
    assert len(api._first_rows(SMALL, peer_p)) == len(SMALL)


@pytest.mark.parametrize("query, named", [({"limit": "0"}, "limit='0'"), ({"limit": "-5"}, "limit='-5'"),
                                          ({"limit": "1.5"}, "limit='1.5'"), ({"offset": "-1"}, "offset='-1'"),
                                          ({"offset": "x"}, "offset='x'"), ({"order": "up"}, "order='up'")])
def test_a_bad_page_parameter_is_refused_by_name(query, named):
    # limit=0 and offset=-1 were taken as 1 and 0; a non-number named neither parameter.
    with pytest.raises(ValueError, match=named):
        api._page_params(SimpleNamespace(query=query))


def test_a_limit_over_a_page_is_a_page():
    assert api._page_params(SimpleNamespace(query={"limit": "5000"}))["limit"] == api.MAX_LIMIT

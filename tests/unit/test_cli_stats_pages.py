"""`kmq stats --limit N|all` beyond the web API's page (1,000 rows): the CLI asks page by page.
Before, --limit 5000 showed the first 1,000 queues without saying so, and 'all' was refused."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from kmq.cli import main
from kmq.cli.ops import PAGE_ROWS, more_pages
from tests import http_stub
from web.paging import MAX_LIMIT

QUEUES = [{"queue": f"q{i:05d}", "depth": i} for i in range(2500)]


def paged(path: str, asked_before: int):
    """The API's answer: at most MAX_LIMIT rows from ``offset``, the total of all."""
    q = parse_qs(urlsplit(path).query)
    offset, limit = int(q.get("offset", ["0"])[0]), min(MAX_LIMIT, int(q["limit"][0]))
    return 200, http_stub.queue_list(QUEUES[offset:offset + limit], total=len(QUEUES)), "application/json"


def stats_json(*args: str) -> tuple[list[dict], list[str]]:
    with http_stub.serving(paged) as (url, asked):
        out = CliRunner().invoke(main, ["stats", "--url", url, "--json", *args])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)["queues"], asked


def test_the_cli_page_is_the_apis():
    assert PAGE_ROWS == MAX_LIMIT


@pytest.mark.parametrize("limit, shown, pages", [("all", 2500, 3), ("1500", 1500, 2), ("1000", 1000, 1),
                                                 ("100", 100, 1)])
def test_a_limit_past_a_page_is_asked_page_by_page(limit, shown, pages):
    rows, asked = stats_json("--limit", limit)
    assert [r["queue"] for r in rows] == [q["queue"] for q in QUEUES[:shown]]
    assert len(asked) == pages


def test_all_is_the_only_word_the_limit_takes():
    out = CliRunner().invoke(main, ["stats", "--url", "http://127.0.0.1:1", "--limit", "every"])
    assert out.exit_code == 2 and "--limit" in out.output and "'all' for every queue" in out.output


def test_a_queue_on_two_pages_is_shown_once_and_a_page_of_nothing_new_ends_it():
    first = {"queues": QUEUES[:PAGE_ROWS], "total": 5000}
    asked: list[int] = []

    def page_at(offset: int) -> list[dict]:
        asked.append(offset)
        return QUEUES[offset - 1:offset - 1 + PAGE_ROWS] if offset < 1500 else QUEUES[:PAGE_ROWS]

    rows = more_pages(first, page_at, None)
    assert [r["queue"] for r in rows] == [q["queue"] for q in QUEUES[:2 * PAGE_ROWS - 1]]
    assert asked == [PAGE_ROWS, 2 * PAGE_ROWS - 1]


def test_a_later_page_not_shaped_as_the_list_ends_it():
    first = {"queues": QUEUES[:PAGE_ROWS], "total": 5000}
    assert more_pages(first, lambda offset: None, None) == QUEUES[:PAGE_ROWS]
    assert more_pages(first, lambda offset: ["x", 3], None) == QUEUES[:PAGE_ROWS]

"""``kmq send | receive | stats``: everyday queue work from a shell (``kmq dlq``: kmq/cli/dlq.py).

The broker commands share kmq/cli/connect.py: connection options, a broker check before
any work, one ``error: ...`` line and exit status 1 for a kmq error.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable

import click

from kmq.cli.connect import TOKEN_GIVEN_AS, connection_options, console, fail, printable, shown
from kmq.cli.option_checks import count_limit, delay_seconds, header_pairs, positive_seconds, tracker_url
from kmq.errors import BrokerUnavailableError, KmqError, MessageTooLargeError
from kmq.protocol.limits import MAX_BATCH_SIZE
from kmq.setting_values import web_url
from kmq.settings import Settings

MAX_REPEAT = 1_000_000  # kmq send --repeat: a CLI for looking and trying, not a load generator
SHOWN_IDS = 5  # kmq send prints the ids of at most this many messages

STATS_COLUMNS = (("queue", "queue"), ("depth", "depth"), ("in_flight", "in flight"),
                 ("scheduled", "scheduled"), ("dead_letters", "dead letters"),
                 ("oldest_in_flight_age_s", "oldest s"), ("sent_per_min", "sent/min"),
                 ("received_per_min", "recv/min"), ("acked_per_min", "acked/min"),
                 ("redelivered_per_min", "redeliv/min"), ("dead_lettered_per_min", "dlq/min"),
                 ("consumers", "consumers"))



@click.command()
@click.argument("queue")
@click.argument("values", nargs=-1)
@click.option("--header", "-H", "headers", multiple=True, callback=header_pairs, help="NAME=VALUE (repeatable).")
@click.option("--delay-s", type=float, default=None, callback=delay_seconds,
              help="Deliver after this many seconds (at most KMQ_MAX_DELAY_S).")
@click.option("--repeat", type=click.IntRange(1, MAX_REPEAT), default=1, show_default=True,
              help=f"Send each value this many times (at most {MAX_REPEAT:,}).")
@connection_options
def send(settings: Settings, queue: str, values: tuple[str, ...], headers: dict[str, str],
         delay_s: float | None, repeat: int) -> None:
    """Send VALUES (or stdin lines when none are given) to QUEUE."""
    from kmq.client import Client

    # The bytes given, UTF-8 or not: arguments as the OS passed them (os.fsencode undoes Python's
    # surrogate escapes, where .encode() raised), stdin read as bytes (lines end in \n or \r\n).
    payloads = ([os.fsencode(v) for v in values]
                or [line.removesuffix(b"\n").removesuffix(b"\r") for line in sys.stdin.buffer])
    check_sizes(queue, payloads, headers, settings.max_message_bytes, "value" if values else "line")
    # Sent as repeated, not as a list repeated first: --repeat 3e9 grew one to 23 GB (an audit).
    sent = 0
    first_ids: list[str] = []
    with Client(settings=settings) as client:
        for _ in range(repeat):
            for p in payloads:
                msg_id = client.send(queue, p, headers=headers or None, delay_s=delay_s)
                sent += 1
                if len(first_ids) < SHOWN_IDS:
                    first_ids.append(msg_id)
        client.flush()
    click.echo(sent_line(queue, sent, first_ids))


def check_sizes(queue: str, payloads: list[bytes], headers: dict[str, str], max_bytes: int, what: str) -> None:
    """Every value measured as the SDK measures each at its send, before the first is sent: a
    value too large after smaller ones left those sent, with an error line for the command."""
    from kmq.send_args import check_headers, check_sizes as sizes_within
    try:
        sizes_within(queue, payloads, check_headers(headers or None), max_bytes,
                     lambda i: f"{what} {i + 1} of {len(payloads)}")
    except MessageTooLargeError as exc:
        raise MessageTooLargeError(f"{exc} (nothing was sent)") from None


def sent_line(queue: str, sent: int, first_ids: list[str]) -> str:
    """``sent N messages to QUEUE`` and, when N is at most 5, their ids."""
    return (f"sent {sent} message{'s' * (sent != 1)} to {queue}"
            + (f": {', '.join(first_ids)}" if 0 < sent <= SHOWN_IDS else ""))


@click.command()
@click.argument("queue")
@click.option("--ack", is_flag=True, help="Ack what was received (else it is released when the "
              "command exits: delivered again at once, counted as a delivery).")
@click.option("--max", "max_messages", type=click.IntRange(1), default=10, show_default=True)
@click.option("--timeout-s", type=float, default=5.0, show_default=True, callback=positive_seconds,
              help="Stop waiting for more messages after this long.")
@click.option("--visibility-timeout-s", type=float, default=None, callback=positive_seconds,
              help="How long the messages stay invisible (default: the queue's).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
@connection_options
def receive(settings: Settings, queue: str, ack: bool, max_messages: int, timeout_s: float,
            visibility_timeout_s: float | None, as_json: bool) -> None:
    """Receive up to --max messages of QUEUE and print them."""
    from kmq.client import Client

    got = []
    with Client(settings=settings) as client:
        with client.consumer(queue, visibility_timeout_s=visibility_timeout_s,
                             max_in_flight=max(1, max_messages), batch_size=min(max(1, max_messages), MAX_BATCH_SIZE)) as c:
            deadline = time.monotonic() + timeout_s
            while len(got) < max_messages and time.monotonic() < deadline:
                batch = c.receive_batch(max_messages - len(got),
                                        timeout_s=max(0.05, min(0.5, deadline - time.monotonic())))
                got += batch
                if ack:
                    # At once, not at exit: an ordered queue's gate holds a group's next message
                    # until this one is settled (acked at exit, one message per group per call).
                    batch.ack()
            c.flush()
    if as_json:
        for m in got:
            click.echo(json.dumps({"id": m.id, "queue": m.queue, "delivery_count": m.delivery_count,
                                   "value": m.value.decode("utf-8", errors="replace"),
                                   "headers": {k: v.decode("utf-8", errors="replace")
                                               for k, v in m.headers.items()}, "acked": ack}))
        return
    from rich.table import Table
    table = Table(title=f"{shown(queue)}: {len(got)} message{'s' * (len(got) != 1)}"
                  + (" (acked)" if ack else " (not acked: released at exit, delivered again at once)"))
    for col in ("id", "delivery", "value", "headers"):
        table.add_column(col)
    for m in got:
        table.add_row(shown(m.id), str(m.delivery_count), shown(m.value[:80].decode("utf-8", errors="replace")),
                      shown(", ".join(f"{k}={v[:40].decode('utf-8', errors='replace')}"
                                      for k, v in m.headers.items())))
    console().print(table)


# -- stats (from the tracker's web API) ----------------------------------------------

def tracker_get(url: str, token: str | None, timeout_s: float) -> dict[str, Any]:
    """The JSON object a tracker's web API answers at ``url``; anything else one KmqError naming
    --url / KMQ_TRACKER_URL (or --token for a 403)."""
    import http.client
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
        except ValueError:
            answer = None
        if not (isinstance(answer, dict) and isinstance(answer.get("error"), str)):
            raise KmqError(not_a_tracker(url, f"HTTP {exc.code}")) from exc  # a bare "HTTP 404" before
        hint = f" ({TOKEN_GIVEN_AS})" if exc.code in (401, 403) else ""
        raise KmqError(f"{url}: HTTP {exc.code} {answer['error']}{hint}") from exc
    except http.client.HTTPException as exc:  # a server that does not speak HTTP: a traceback before
        raise KmqError(not_a_tracker(url, f"not HTTP ({type(exc).__name__})")) from exc
    except (urllib.error.URLError, OSError) as exc:
        waited_s = time.monotonic() - started
        waited = f"tried for {waited_s:.1f} s; " if waited_s >= 0.05 else ""  # not "0.0 s": refused at once
        raise BrokerUnavailableError(
            f"no tracker web view answered at {url} ({waited}--url / KMQ_TRACKER_URL): "
            f"{getattr(exc, 'reason', exc)}") from exc
    try:
        data = json.loads(body)
    except ValueError:  # an HTML page: a traceback before
        data = None
    if not isinstance(data, dict):
        raise KmqError(not_a_tracker(url, "not a JSON object"))
    return data


def not_a_tracker(url: str, answer: str) -> str:
    return (f"{url} answered {answer}, not a tracker's JSON: is --url / KMQ_TRACKER_URL a tracker "
            "worker's web address (KMQ_WEB_HOST:KMQ_WEB_PORT, e.g. http://127.0.0.1:6066)?")


# What `kmq stats` prints of the list and of a queue's detail (docs/web.md).
LIST_FIELDS = ("queues", "total", "workers", "partial")
DETAIL_FIELDS = ("queue", "in_flight_range_count", "dead_letters_detail", "since_start")
# The list's sort fields (web/queue_stats.py's SORT_FIELDS; a test keeps the two equal).
STATS_SORT_FIELDS = ("queue", "depth", "in_flight", "scheduled", "dead_letters", "oldest_in_flight_age_s",
                     "consumers", "sent_per_min", "received_per_min", "acked_per_min", "released_per_min",
                     "rejected_per_min", "redelivered_per_min", "dead_lettered_per_min", "late_per_min")


STATS_SCAN_POLL_S = 0.25  # asking again for the depth scan's first pass
PAGE_ROWS = 1000  # the web API's most rows a page (web.paging.MAX_LIMIT): more are asked page by page


def shape_problems(data: dict[str, Any], detail: bool) -> list[str]:
    """The fields of a queue view (list or detail) whose types are not the tracker's, as
    ``field of type T``: another service's JSON with the right names is refused as one line."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    checks: dict[str, Callable[[Any], bool]] = (
        {"in_flight_range_count": number,
         "dead_letters_detail": lambda v: isinstance(v, dict) and number(v.get("count"))} if detail else
        {"queues": lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v),
         "total": number, "workers": number, "partial": lambda v: isinstance(v, bool)})
    return [f"{field} of type {type(data[field]).__name__}" for field, ok in checks.items() if not ok(data[field])]


def more_pages(first: dict[str, Any], page_at: Callable[[int], list[dict[str, Any]]],
               limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` rows (None: all) of the queue list whose first page is ``first``,
    asking ``page_at(offset)`` for the pages after it (--limit 5000 showed 1,000 before). A
    queue seen on an earlier page is not shown twice (the list may change between pages);
    a page that adds none ends it."""
    rows = list(first["queues"])
    seen = {r.get("queue") for r in rows}
    page = rows
    while len(page) >= PAGE_ROWS and len(rows) < first["total"] and (limit is None or len(rows) < limit):
        page = page_at(len(rows))
        if not isinstance(page, list):  # not the list's shape: what came is what is shown
            break
        new = [r for r in page if isinstance(r, dict) and r.get("queue") not in seen]
        if not new:
            break
        seen.update(r.get("queue") for r in new)
        rows += new
    return rows if limit is None else rows[:limit]


@click.command()
@click.argument("queue", required=False)
@click.option("--url", envvar="KMQ_TRACKER_URL", default=None, callback=tracker_url,
              help="A tracker worker's web address (KMQ_TRACKER_URL; default from KMQ_WEB_HOST/PORT).")
@click.option("--token", envvar="KMQ_TOKEN", default=None, help="Token when auth is on (KMQ_TOKEN).")
@click.option("--sort", default="queue", show_default=True, type=click.Choice(STATS_SORT_FIELDS),
              help="A field of the queue list to sort by (numbers: biggest first; not with QUEUE).")
@click.option("--limit", type=str, default="100", show_default=True, metavar="N|all",
              callback=count_limit("every queue"),
              help="Show at most this many queues ('all': every one; not with QUEUE).")
@click.option("--timeout-s", type=float, default=10.0, show_default=True, callback=positive_seconds,
              help="How long to wait for the tracker (and its depth scan's next pass).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
def stats(queue: str | None, url: str | None, token: str | None, sort: str, limit: int | None,
          timeout_s: float, as_json: bool) -> None:
    """A table of every queue (or QUEUE's detail) from the tracker's web API."""
    from urllib.parse import quote, urlencode
    if queue is not None:  # one queue's detail has no list to sort or cut: they were ignored
        ctx = click.get_current_context()
        given = [f"--{p}" for p in ("sort", "limit")
                 if ctx.get_parameter_source(p) is not click.core.ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{' and '.join(given)} shape{'s' if len(given) == 1 else ''} the "
                                   "table of all queues, not one "
                                   f"queue's detail: leave {' and '.join(given)} out for QUEUE "
                                   f"{printable(queue)}, or leave QUEUE out for the table")
    try:
        settings = Settings.from_env(token=token)
        if url is None:
            url = web_url(settings.web_host, settings.web_port)  # ::0 and [::] are wildcards too
        base = url.rstrip("/")
        address = (f"{base}/kmq/api/queues/{quote(queue, safe='')}" if queue else
                   f"{base}/kmq/api/queues?" + urlencode({"sort": sort, "limit": min(limit or PAGE_ROWS, PAGE_ROWS)}))
        deadline = time.monotonic() + timeout_s
        data = tracker_get(address, settings.token or None, timeout_s)
        # The depth scan runs only while somebody looks: the first look after a quiet spell
        # starts it, and depths (and queues only sent to) come with its first pass.
        while data.get("scanned") is False and time.monotonic() < deadline:
            time.sleep(STATS_SCAN_POLL_S)
            data = tracker_get(address, settings.token or None, timeout_s)
        missing = [f for f in (DETAIL_FIELDS if queue else LIST_FIELDS) if f not in data]
        wrong = missing or shape_problems(data, queue is not None)
        if wrong:  # another service's JSON (a KeyError, an AttributeError or a TypeError before)
            raise KmqError(f"{address} answered {'without' if missing else 'with'} {', '.join(wrong)}: not a "
                           "tracker's queue view; is --url / KMQ_TRACKER_URL a tracker worker's web address?")
        if not queue:
            data["queues"] = more_pages(data, lambda offset: tracker_get(
                f"{address}&offset={offset}", settings.token or None, timeout_s).get("queues"), limit)
    except KmqError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    from rich.table import Table
    rows = [data] if queue else data["queues"]
    title = (f"queue {shown(queue)}" if queue else
             shown(f"{data['total']} queues ({data['workers']} workers)") + (" PARTIAL" if data["partial"] else ""))
    table = Table(title=title)
    for _, label in STATS_COLUMNS:
        table.add_column(label, justify="left" if label == "queue" else "right")
    for r in rows:
        cells = []
        for field, _ in STATS_COLUMNS:
            v = r.get(field)
            if field == "depth" and v is not None and r.get("depth_exact") is False:
                v = f">={v}"
            cells.append("-" if v is None else shown(v))
        table.add_row(*cells)
    out = console()
    out.print(table)
    if queue:
        dl = data["dead_letters_detail"]
        out.print(shown(f"in-flight ranges: {data['in_flight_range_count']}; dead letters: {dl['count']}; "
                        f"since start: {data['since_start']}"))


COMMANDS = (send, receive, stats)

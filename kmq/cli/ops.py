"""``kmq send | receive | stats | dlq``: everyday queue work from a shell.

Every command takes ``--bootstrap-servers`` (``KMQ_BOOTSTRAP_SERVERS``) and
``--token`` (``KMQ_TOKEN``), checks that a broker answers within
``--connect-timeout-s`` before doing anything (so a broker that is down is
an error naming the address and how long we tried, not a hang), and turns
kmq errors into one ``error: ...`` line and exit status 1. ``rich`` is
imported only when a command prints.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable

import click

from kmq.cli.option_checks import (delay_seconds, header_pairs, positive_rate, positive_seconds,
                                   tracker_url)
from kmq.errors import BrokerUnavailableError, KmqError
from kmq.protocol.limits import MAX_BATCH_SIZE
from kmq.settings import Settings

STATS_COLUMNS = (("queue", "queue"), ("depth", "depth"), ("in_flight", "in flight"),
                 ("scheduled", "scheduled"), ("dead_letters", "dead letters"),
                 ("oldest_in_flight_age_s", "oldest s"), ("sent_per_min", "sent/min"),
                 ("received_per_min", "recv/min"), ("acked_per_min", "acked/min"),
                 ("redelivered_per_min", "redeliv/min"), ("dead_lettered_per_min", "dlq/min"),
                 ("consumers", "consumers"))


def console(stderr: bool = False) -> Any:
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (pipes, tests): wide enough that rows never wrap.
    return Console(file=stream, width=None if stream.isatty() else 200, highlight=False)


# C0 and C1 control characters: an escape sequence in a payload must not reach the terminal.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(text: object) -> str:
    """Text from a topic or a tracker, safe to print with rich: control characters replaced
    (no escape sequence reaches the terminal) and markup escaped (a payload of ``[/]`` or
    ``[link=...]`` is printed as it is, not interpreted)."""
    from rich.markup import escape
    return escape(_CONTROLS.sub("\ufffd", str(text)))


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def connection_options(fun: Callable) -> Callable:
    """--bootstrap-servers, --token, --connect-timeout-s; passes ``settings`` to the command."""

    @click.option("--bootstrap-servers", envvar="KMQ_BOOTSTRAP_SERVERS", default=None,
                  help="host:port[,host:port] of the Kafka brokers (KMQ_BOOTSTRAP_SERVERS).")
    @click.option("--token", envvar="KMQ_TOKEN", default=None,
                  help="Token presented when auth is on (KMQ_TOKEN).")
    @click.option("--connect-timeout-s", default=10.0, show_default=True, type=float,
                  callback=positive_seconds, help="How long to wait for a broker before giving up.")
    @functools.wraps(fun)
    def wrapper(bootstrap_servers: str | None, token: str | None, connect_timeout_s: float,
                **kwargs: Any) -> Any:
        try:
            settings = Settings.from_env(bootstrap_servers=bootstrap_servers, token=token)
            check_broker(settings, connect_timeout_s)
            return fun(settings=settings, **kwargs)
        except KmqError as exc:
            fail(str(exc))

    return wrapper


MAX_SETUP_TIMEOUT_MS = 2_147_483_647  # librdkafka's bound of socket.connection.setup.timeout.ms


def check_config(config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """The broker check's librdkafka config: a connection attempt may take the whole wait, within
    librdkafka's bounds (a --connect-timeout-s of 1e9 was a traceback naming the setting)."""
    return {**config, "log_level": 0,  # our error says it all
            "socket.connection.setup.timeout.ms": min(MAX_SETUP_TIMEOUT_MS, max(1000, int(timeout_s * 1000)))}


def check_broker(settings: Settings, timeout_s: float) -> None:
    """Raise BrokerUnavailableError (address, time tried) unless a broker answers in time."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kmq.kafka.profiles import client_config

    admin = AdminClient(check_config(client_config(settings), timeout_s))
    started = time.monotonic()
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {settings.bootstrap_servers} (tried for "
            f"{time.monotonic() - started:.1f} s; --bootstrap-servers / KMQ_BOOTSTRAP_SERVERS): "
            f"{exc.args[0].str() if exc.args and hasattr(exc.args[0], 'str') else exc}") from exc


@click.command()
@click.argument("queue")
@click.argument("values", nargs=-1)
@click.option("--header", "-H", "headers", multiple=True, callback=header_pairs, help="NAME=VALUE (repeatable).")
@click.option("--delay-s", type=float, default=None, callback=delay_seconds,
              help="Deliver after this many seconds (at most KMQ_MAX_DELAY_S).")
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True,
              help="Send each value this many times.")
@connection_options
def send(settings: Settings, queue: str, values: tuple[str, ...], headers: dict[str, str],
         delay_s: float | None, repeat: int) -> None:
    """Send VALUES (or stdin lines when none are given) to QUEUE."""
    from kmq.client import Client

    # The bytes given, UTF-8 or not: arguments as the OS passed them (os.fsencode undoes Python's
    # surrogate escapes, where .encode() raised), stdin read as bytes (lines end in \n or \r\n).
    payloads = ([os.fsencode(v) for v in values]
                or [line.removesuffix(b"\n").removesuffix(b"\r") for line in sys.stdin.buffer])
    payloads = payloads * repeat
    with Client(settings=settings) as client:
        ids = [client.send(queue, p, headers=headers or None, delay_s=delay_s)
               for p in payloads]
        client.flush()
    click.echo(sent_line(queue, ids))


def sent_line(queue: str, ids: list[str]) -> str:
    """``sent N messages to QUEUE`` and, for up to 5, their ids."""
    return (f"sent {len(ids)} message{'s' * (len(ids) != 1)} to {queue}"
            + (f": {', '.join(ids)}" if 0 < len(ids) <= 5 else ""))


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
                got += c.receive_batch(max_messages - len(got),
                                       timeout_s=max(0.05, min(0.5, deadline - time.monotonic())))
            if ack:
                for m in got:
                    m.ack()
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
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error", "")
        except ValueError:
            detail = ""
        raise KmqError(f"{url}: HTTP {exc.code} {detail}".rstrip()) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise BrokerUnavailableError(
            f"no tracker web view answered at {url} (tried for {time.monotonic() - started:.1f} s; "
            f"--url / KMQ_TRACKER_URL): {getattr(exc, 'reason', exc)}") from exc


STATS_SCAN_POLL_S = 0.25  # asking again for the depth scan's first pass


@click.command()
@click.argument("queue", required=False)
@click.option("--url", envvar="KMQ_TRACKER_URL", default=None, callback=tracker_url,
              help="A tracker worker's web address (KMQ_TRACKER_URL; default from KMQ_WEB_HOST/PORT).")
@click.option("--token", envvar="KMQ_TOKEN", default=None, help="Token when auth is on (KMQ_TOKEN).")
@click.option("--sort", default="queue", show_default=True)
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True, help="Show at most this many queues.")
@click.option("--timeout-s", type=float, default=10.0, show_default=True, callback=positive_seconds,
              help="How long to wait for the tracker (and its depth scan's next pass).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
def stats(queue: str | None, url: str | None, token: str | None, sort: str, limit: int,
          timeout_s: float, as_json: bool) -> None:
    """A table of every queue (or QUEUE's detail) from the tracker's web API."""
    from urllib.parse import quote, urlencode
    try:
        settings = Settings.from_env(token=token)
        if url is None:
            host = "127.0.0.1" if settings.web_host in ("0.0.0.0", "::", "") else settings.web_host
            url = f"http://{host}:{settings.web_port}"
        base = url.rstrip("/")
        address = (f"{base}/kmq/api/queues/{quote(queue, safe='')}" if queue else
                   f"{base}/kmq/api/queues?" + urlencode({"sort": sort, "limit": limit}))
        deadline = time.monotonic() + timeout_s
        data = tracker_get(address, settings.token or None, timeout_s)
        # The depth scan runs only while somebody looks: the first look after a quiet spell
        # starts it, and depths (and queues only sent to) come with its first pass.
        while data.get("scanned") is False and time.monotonic() < deadline:
            time.sleep(STATS_SCAN_POLL_S)
            data = tracker_get(address, settings.token or None, timeout_s)
    except KmqError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    from rich.table import Table
    rows = [data] if queue else data["queues"]
    title = (f"queue {shown(queue)}" if queue else
             f"{data['total']} queues ({data['workers']} workers)" + (" PARTIAL" if data["partial"] else ""))
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


# -- dead letters ------------------------------------------------------------------------

@click.group()
def dlq() -> None:
    """Dead letters of a queue: list, redrive (back to the queue), purge."""


@dlq.command("list")
@click.argument("queue")
@click.option("--limit", type=click.IntRange(0), default=50, show_default=True,
              help="Show the newest this many (0: all).")
@click.option("--reason", default=None,
              help="Only this reason (max-deliveries, rejected, payload-expired, payload-too-large).")
@click.option("--json", "as_json", is_flag=True)
@connection_options
def dlq_list(settings: Settings, queue: str, limit: int, reason: str | None, as_json: bool) -> None:
    """List QUEUE's dead letters (newest last)."""
    from kmq.client import Client

    with Client(settings=settings) as client:
        letters = client.dead_letters(queue, reason=reason)
    newest = letters[-limit:] if limit > 0 else letters
    if as_json:
        for d in newest:
            click.echo(json.dumps({"offset": d.offset, "id": d.id, "reason": d.reason, "detail": d.detail,
                                   "deliveries": d.deliveries, "dead_lettered_ms": d.dead_lettered_ms,
                                   "value": d.value.decode("utf-8", errors="replace")}))
        return
    from rich.table import Table
    table = Table(title=f"{shown(queue)}: {len(letters)} dead letter{'s' * (len(letters) != 1)}"
                  + (f" (newest {len(newest)} shown)" if len(newest) < len(letters) else ""))
    for col in ("offset", "id", "reason", "deliveries", "dead-lettered", "value"):
        table.add_column(col)
    for d in newest:
        table.add_row(str(d.offset), shown(d.id), shown(d.reason + (f": {d.detail}" if d.detail else "")),
                      str(d.deliveries), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.dead_lettered_ms / 1000)),
                      shown(d.value[:60].decode("utf-8", errors="replace")))
    console().print(table)


@dlq.command("redrive")
@click.argument("queue")
@click.option("--limit", type=click.IntRange(0), default=None, help="Move at most this many (oldest first).")
@click.option("--reason", default=None, help="Only dead letters with this reason.")
@click.option("--rate", "rate_per_s", type=float, default=500.0, show_default=True, callback=positive_rate,
              help="Messages per second at most.")
@click.option("--batch-size", type=click.IntRange(1), default=100, show_default=True,
              help="Dead letters moved per transaction.")
@connection_options
def dlq_redrive(settings: Settings, queue: str, limit: int | None, reason: str | None,
                rate_per_s: float, batch_size: int) -> None:
    """Move QUEUE's dead letters back to it, exactly once each, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from kmq.client import Client

    with Client(settings=settings) as client, Progress(
            "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
            TimeRemainingColumn(), console=console(stderr=True), transient=False) as bar:
        task = bar.add_task(f"redriving {queue}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = client.redrive(queue, reason=reason, limit=limit, rate_per_s=rate_per_s,
                                batch_size=batch_size, progress=progress)
        bar.update(task, total=result.moved, completed=result.moved)
    click.echo(f"redrove {result.moved} dead letter{'s' * (result.moved != 1)} to {queue}; "
               f"{result.remaining} remain")


@dlq.command("purge")
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Do not ask.")
@connection_options
def dlq_purge(settings: Settings, queue: str, yes: bool) -> None:
    """Drop every dead letter of QUEUE."""
    from kmq.client import Client

    if not yes:
        click.confirm(f"drop every dead letter of {queue}?", abort=True)
    with Client(settings=settings) as client:
        n = client.purge_dead_letters(queue)
    click.echo(f"purged {n} dead letter{'s' * (n != 1)} of {queue}")


COMMANDS = (send, receive, stats, dlq)

"""``kmq dlq list | redrive | purge``: a queue's dead letters from a shell."""

from __future__ import annotations

import json
import time

import click

from kmq.cli.connect import connection_options, console, shown
from kmq.cli.option_checks import count_limit, positive_rate
from kmq.settings import Settings


@click.group()
def dlq() -> None:
    """Dead letters of a queue: list, redrive (back to the queue), purge."""


@dlq.command("list")
@click.argument("queue")
@click.option("--limit", type=str, default="50", show_default=True, metavar="N|all",
              callback=count_limit("every dead letter"), help="Show the newest this many ('all': every one).")
@click.option("--reason", default=None,
              help="Only this reason (max-deliveries, rejected, payload-expired, payload-too-large).")
@click.option("--json", "as_json", is_flag=True)
@connection_options
def dlq_list(settings: Settings, queue: str, limit: int | None, reason: str | None, as_json: bool) -> None:
    """List QUEUE's dead letters (newest last)."""
    from kmq.client import Client

    with Client(settings=settings) as client:
        letters = client.dead_letters(queue, reason=reason)
    newest = letters[-limit:] if limit else letters
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
@click.option("--limit", type=str, default=None, metavar="N|all", callback=count_limit("every one (the default)"),
              help="Move at most this many (oldest first; default all).")
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

    # The bar is drawn at the first transaction's report, so an error before any move
    # (no such queue, a bad setting) is one error line, not an empty bar above it.
    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=console(stderr=True), transient=False)
    task = bar.add_task(f"redriving {queue}", total=None)

    def progress(done: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    try:
        with Client(settings=settings) as client:
            result = client.redrive(queue, reason=reason, limit=limit, rate_per_s=rate_per_s,
                                    batch_size=batch_size, progress=progress)
    finally:
        if bar.live.is_started:
            bar.stop()
    kept = (f" ({result.without_payload} without a payload, kept: payload-expired or payload-too-large)"
            if result.without_payload else "")
    click.echo(f"redrove {result.moved} dead letter{'s' * (result.moved != 1)} to {queue}; "
               f"{result.remaining} remain{kept}")


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

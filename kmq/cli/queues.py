"""``kmq queue show | set | purge``: a queue's settings and purge from a shell.

What ``client.queue_config``, ``client.configure_queue`` and ``client.purge`` do, for
operators: switch a queue between shared and partition dispatch at run time, change its
visibility timeout or dead-letter policy, drop everything it holds, without writing Python.
Every ``set`` option that has a deployment default takes ``default`` to restore it (the
Python call's ``None``). Turning the options into ``configure_queue`` changes is pure
(:func:`changes_of`), so its errors are tested without a broker.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

import click

from kmq.backoff import Backoff
from kmq.cli.connect import connection_options, console, shown
from kmq.cli.option_checks import positive_seconds
from kmq.errors import ConfigError
from kmq.queue_config import DEAD_LETTER_HEAD_POLICIES, DISPATCH_MODES, ORDERINGS, QueueConfig
from kmq.settings import Settings

DEFAULT = "default"  # an option's value that restores the deployment's default (None)


def _number(name: str, text: str, kind: type) -> Any:
    if text == DEFAULT:
        return None
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(f"--{name.replace('_', '-')} {text!r}: give {what} or {DEFAULT!r}") from None


def backoff_of(spec: str) -> Backoff:
    """``none``, ``fixed:S`` or ``exponential:BASE_S:MAX_S[:MULTIPLIER[:JITTER]]`` (jitter
    ``none``, ``full`` or ``equal``; default ``full``); ``default`` is ``none``."""
    kind, *args = spec.split(":")
    usage = ("--backoff: use none, fixed:SECONDS or exponential:BASE_S:MAX_S[:MULTIPLIER[:JITTER]] "
             f"(got {spec!r})")
    try:
        if kind in ("none", DEFAULT) and not args:
            return Backoff.none()
        if kind == "fixed" and len(args) == 1:
            return Backoff.fixed(float(args[0]))
        if kind == "exponential" and 2 <= len(args) <= 4:
            base_s, max_s = float(args[0]), float(args[1])
            multiplier = float(args[2]) if len(args) > 2 else 2.0
            return Backoff.exponential(base_s, max_s, multiplier, *args[3:])
    except ConfigError as exc:  # the policy's own check names the field: name the option too
        raise ConfigError(f"--backoff {spec}: {exc}") from exc
    except ValueError:  # not a number
        pass
    raise ConfigError(usage)


def as_option(message: str, options: dict[str, Any]) -> str:
    """An SDK error about a setting (``visibility_timeout_s=-5.0 must be ...``), led by the
    ``kmq queue set`` option it came from (``--visibility-timeout-s -5: ...``)."""
    name = message.split("=", 1)[0]
    if "=" not in message or options.get(name) is None:
        return message
    value = options[name]
    shown = ("" if value is True else " (off)") if isinstance(value, bool) else f" {value}"
    return f"--{name.replace('_', '-')}{shown}: {message}"


def changes_of(options: dict[str, Any]) -> dict[str, Any]:
    """``configure_queue`` keyword arguments from ``kmq queue set``'s options (None: not given)."""
    changes: dict[str, Any] = {}
    for name, kind in (("visibility_timeout_s", float), ("max_processing_s", float),
                       ("max_deliveries", int), ("dedup_window_s", float)):
        if options.get(name) is not None:
            changes[name] = _number(name, options[name], kind)
    for name in ("dispatch", "ordering", "dead_letter_head"):
        if options.get(name) is not None:
            changes[name] = None if options[name] == DEFAULT else options[name]
    if options.get("backoff") is not None:
        changes["backoff"] = backoff_of(options["backoff"])
    if options.get("dead_letter") is not None:
        changes["dead_letter"] = options["dead_letter"]
    if options.get("spread") is not None:
        changes["spread"] = options["spread"]
    if not changes:
        raise ConfigError("nothing to change: give at least one option (kmq queue set --help)")
    return changes


def described(queue: str, cfg: QueueConfig, settings: Settings) -> dict[str, Any]:
    """The queue's settings as they apply (deployment defaults filled in) and which were set."""
    backoff = cfg.backoff
    return {
        "queue": queue,
        "dispatch": cfg.dispatch_mode(settings),
        "visibility_timeout_s": cfg.visibility_s(settings),
        "max_processing_s": cfg.processing_s(settings),
        "max_deliveries": cfg.deliveries(settings),
        "dead_letter": cfg.dead_letter,
        "backoff": backoff.to_dict(),
        "spread": cfg.spread,
        "ordering": cfg.ordering,
        "dead_letter_head": cfg.dead_letter_head,
        "dedup_window_s": cfg.dedup_window_s,
        "tenant": cfg.tenant,
        "handover_pending": cfg.handover_pending,
        "purged_before": {str(p): o for p, o in sorted(cfg.purged_before.items())},
        # Left to the deployment's KMQ_* default (the Python call's None).
        "defaults": [name for name, v in (("dispatch", cfg.dispatch),
                                          ("visibility_timeout_s", cfg.visibility_timeout_s),
                                          ("max_processing_s", cfg.max_processing_s),
                                          ("max_deliveries", cfg.max_deliveries)) if v is None],
    }


def _print(d: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(d))
        return
    from rich.table import Table
    table = Table(title=shown(d["queue"]))
    table.add_column("setting")
    table.add_column("value")
    for name, v in d.items():
        if name in ("queue", "defaults"):
            continue
        text = ", ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)
        table.add_row(name, shown(text) + (" (default)" if name in d["defaults"] else ""))
    console().print(table)


@click.group("queue")
def queue_group() -> None:
    """A queue's settings: show, set (at run time), purge."""


@queue_group.command("show")
@click.argument("queue")
@click.option("--json", "as_json", is_flag=True)
@connection_options
def queue_show(settings: Settings, queue: str, as_json: bool) -> None:
    """Show QUEUE's settings as they apply (deployment defaults marked)."""
    from kmq.client import Client

    with Client(settings=settings) as client:
        cfg = client.queue_config(queue)
    _print(described(queue, cfg, settings), as_json)


# `kmq queue set`'s settings (the options changes_of turns into configure_queue changes).
SET_OPTIONS = ("dispatch", "visibility_timeout_s", "max_processing_s", "max_deliveries", "backoff",
               "dead_letter", "spread", "ordering", "dead_letter_head", "dedup_window_s")


def _a_setting_given(fun: Callable) -> Callable:
    """No setting is a usage error before the broker check (it was an error line after it, exit
    status 1, or the broker's error when the broker was down)."""
    @functools.wraps(fun)
    def wrapper(**kwargs: Any) -> Any:
        if all(kwargs.get(name) is None for name in SET_OPTIONS):
            names = ", ".join("--dead-letter/--no-dead-letter" if n == "dead_letter" else
                              f"--{n.replace('_', '-')}" for n in SET_OPTIONS)
            raise click.UsageError(f"give at least one setting to change: {names} (e.g. "
                                   "--visibility-timeout-s 60; kmq queue show QUEUE prints them)")
        return fun(**kwargs)
    return wrapper


@queue_group.command("set")
@click.argument("queue")
@click.option("--dispatch", type=click.Choice([*DISPATCH_MODES, DEFAULT]),
              help="shared (any number of consumers) or partition (a consumer group); docs/shared-queues.md.")
@click.option("--visibility-timeout-s", metavar="SECONDS|default", help="Seconds a received message stays invisible (or 'default').")
@click.option("--max-processing-s", metavar="SECONDS|default", help="Longest keepalive of a message in user code (or 'default').")
@click.option("--max-deliveries", metavar="N|default", help="Deliveries before dead-lettering (or 'default').")
@click.option("--backoff", metavar="SPEC", help="none, fixed:S or exponential:BASE_S:MAX_S[:MULTIPLIER[:JITTER]].")
@click.option("--dead-letter/--no-dead-letter", default=None,
              help="Rejected and max-deliveries messages: dead-letter, or drop.")
@click.option("--spread", type=int, metavar="N", help="Queue partitions the queue's sends spread over.")
@click.option("--ordering", type=click.Choice([*ORDERINGS, DEFAULT]), help="group: one message per kmq.group in flight.")
@click.option("--dead-letter-head", type=click.Choice([*DEAD_LETTER_HEAD_POLICIES, DEFAULT]),
              help="What a dead-lettered group head does (ordering=group).")
@click.option("--dedup-window-s", metavar="SECONDS|default", help="Seconds within which a repeated kmq.dedup-id is dropped (or 'default').")
@click.option("--json", "as_json", is_flag=True, help="Print the settings after the change as JSON.")
@_a_setting_given
@connection_options
def queue_set(settings: Settings, queue: str, as_json: bool, **options: Any) -> None:
    """Change QUEUE's settings at run time (consumers and the tracker follow, no restarts)."""
    from kmq.client import Client

    changes = changes_of(options)
    with Client(settings=settings) as client:
        try:
            cfg = client.configure_queue(queue, **changes)
        except ConfigError as exc:  # the SDK names the setting: name the option given for it too
            raise ConfigError(as_option(str(exc), options)) from exc
    _print(described(queue, cfg, settings), as_json)
    if cfg.handover_pending and not as_json:
        click.echo(f"{queue} goes to partition mode once the tracker hands it over "
                   "(its consumers join a group then)")


@queue_group.command("purge")
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Do not ask.")
@click.option("--timeout-s", type=float, default=30.0, show_default=True, callback=positive_seconds,
              help="How long to wait for the tracker to confirm.")
@connection_options
def queue_purge(settings: Settings, queue: str, yes: bool, timeout_s: float) -> None:
    """Drop every message of QUEUE: enqueued, in flight and scheduled (SQS PurgeQueue)."""
    from kmq.client import Client

    if not yes:
        click.confirm(f"drop every message of {queue}?", abort=True)
    with Client(settings=settings) as client:
        point = client.purge(queue, timeout_s=timeout_s)
    below = ", ".join(f"offset {o} of partition {p}" for p, o in sorted(point.items()) if o)
    click.echo(f"purged {queue}: " + (f"every record below {below}" if below else "nothing was enqueued"))


COMMANDS = (queue_group,)

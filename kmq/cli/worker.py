"""``kmq worker MODULE``: run every ``@kmq.handler`` of a module (kmq.worker).

Connection options and errors as the other broker commands (kmq/cli/connect.py): a broker that
does not answer within ``--connect-timeout-s`` is one ``error: ...`` line naming the address
and how long we tried, exit status 1, before any handler starts; so is a handler whose
consumer does not open. Logs go to stderr as ``<date> <time> <LEVEL> <logger> <message>``;
the worker's events are logger ``kmq.worker`` lines whose message is a JSON object.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import sys

import click

from kmq.cli.connect import connection_options
from kmq.settings import Settings

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_ATTACHED_P = re.compile(r"-p=?\d+")  # -p2, -p=2


def _finite(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value!r}: give a number of seconds, e.g. 30")
    return value


def _queue_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str]:
    """--queues' names; given, it names at least one (',' or '' ran every handler, silently)."""
    names = [q.strip() for q in (value or "").split(",") if q.strip()]
    if value is not None and not names:
        raise click.BadParameter(f"{value!r} names no queue: give queue names, e.g. emails,thumbnails, "
                                 "or leave --queues out to run every handler")
    return names


def _ports_checked(fun):
    """The metrics ports of --processes' children, checked before the broker is (a usage error)."""
    @functools.wraps(fun)
    def wrapper(**kwargs):
        port, processes = kwargs["metrics_port"], kwargs["processes"]
        if processes > 1 and port and port + processes - 1 > 65535:
            raise click.UsageError(f"--metrics-port {port} with --processes {processes} needs ports "
                                   f"up to {port + processes - 1}: give a port of at most "
                                   f"{65536 - processes}, or 0 for any")
        return fun(**kwargs)
    return wrapper


@click.command("worker")
@click.argument("module")
@click.option("--queues", "-Q", default=None, callback=_queue_list,
              help="Only these queues' handlers (comma-separated).")
@click.option("--concurrency", "-c", type=click.IntRange(1, 10_000), default=None,
              help="Messages each handler handles at once (default: the decorator's).")
@click.option("--processes", "-p", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Worker processes (for CPU-bound handlers); signals are passed on.")
@click.option("--grace-s", type=click.FloatRange(0), default=30.0, show_default=True, callback=_finite,
              help="After SIGTERM, how long running handlers may finish before being released.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on --metrics-host:PORT (0: any free port); with "
                   "--processes N, process i serves on PORT + i.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address metrics bind.")
@click.option("--parent-pid", type=int, default=None, hidden=True,
              help="(--processes' children) drain and stop when this process is gone.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@_ports_checked
@connection_options
def worker(settings: Settings, module: str, queues: list[str], concurrency: int | None, processes: int,
           grace_s: float, metrics_port: int | None, metrics_host: str, parent_pid: int | None,
           log_level: str) -> None:
    """Run the @kmq.handler functions of MODULE (e.g. `kmq worker jobs`) until SIGTERM.

    Prints `ready` on stdout once every handler's consumer is open. SIGTERM/SIGINT: stop
    receiving, let running handlers finish within --grace-s, give back prefetched
    messages, flush settlements, exit 0. A second signal exits at once (status 1; what
    was running comes back after its visibility timeout).
    """
    from kmq.worker.main import run_processes, run_worker

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr, format=LOG_FORMAT)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `kmq worker jobs` finds ./jobs.py, as celery and arq do
    if processes > 1:  # (their metrics ports were checked before the broker: _ports_checked)
        argv = sys.argv[1:]
        argv = _without_processes(argv[argv.index("worker") + 1:])  # the options after `worker`
        sys.exit(run_processes(child_argvs(argv, processes, metrics_port, os.getpid())))
    # A KmqError (no handler, a failed start) is one error line from connection_options.
    sys.exit(run_worker(module, queues=queues, concurrency=concurrency,
                        grace_s=grace_s, metrics_port=metrics_port, metrics_host=metrics_host,
                        settings=settings, parent_pid=parent_pid))


def _without_processes(argv: list[str]) -> list[str]:
    """``argv`` without ``--processes N`` / ``-p N`` / ``--processes=N`` / ``-pN`` (children
    run one each)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--processes", "-p"):
            skip = True
        elif not (a.startswith("--processes=") or _ATTACHED_P.fullmatch(a)):
            out.append(a)
    return out


def child_argvs(argv: list[str], processes: int, metrics_port: int | None,
                parent_pid: int) -> list[list[str]]:
    """Each child's options: one process each (the last ``--processes`` wins in click, so
    a form not stripped cannot start children of its own), metrics ports of their own, and
    the parent to outlive no longer than a drain."""
    children = []
    for i in range(processes):
        own = ["--processes", "1", "--parent-pid", str(parent_pid)]
        if metrics_port:  # 0: each takes a free port
            own += ["--metrics-port", str(metrics_port + i)]
        children.append([*argv, *own])
    return children

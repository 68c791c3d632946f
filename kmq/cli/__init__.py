"""The ``kmq`` command line.

``kmq dev`` is the README's main job: embedded broker + tracker worker +
web view + a demo workload; Ctrl-C stops everything it started.
``kmq send | receive | stats`` (kmq/cli/ops.py), ``kmq dlq`` (kmq/cli/dlq.py), ``kmq queue`` (kmq/cli/queues.py) and ``kmq bench``
(kmq/dev/bench.py) are the everyday tools; ``kmq spark`` the report jobs.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

import click

from kmq.errors import KmqError


@click.group()
def main() -> None:
    """kmq: message-queue semantics on Kafka."""


@main.command()
@click.option("--web-port", type=click.IntRange(0, 65535), default=6066, show_default=True,
              help="Tracker web view port (0: any free).")
@click.option("--demo/--no-demo", default=True, show_default=True, help="Run the demo workload.")
@click.option("--exit-after-demo", is_flag=True, help="Stop everything once the demo is done.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Tracker data dir (default: a fresh temporary one).")
def dev(web_port: int, demo: bool, exit_after_demo: bool, data_dir: str | None) -> None:
    """Embedded broker + tracker worker + web view (+ demo workload)."""
    from kmq.kafka.admin import ensure_topics
    from kmq.client import Client
    from kmq.dev.devstack import TrackerProcess, dev_settings, make_data_dir, service_root
    from kmq.dev.embedded import EmbeddedBroker, free_port

    try:  # before the broker starts: these would fail in the tracker, its error only in its log
        service_root()
        if data_dir:
            make_data_dir(data_dir)
    except KmqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    work = Path(tempfile.mkdtemp(prefix="kmq-dev-"))
    if web_port and not _port_free(web_port):
        click.echo(f"port {web_port} is taken; using a free one")
        web_port = 0
    broker = EmbeddedBroker(log_path=work / "broker.log")
    tracker = None
    try:
        broker.start()
        settings = dev_settings(broker.bootstrap_servers, data_dir or str(work / "tracker-data"),
                                web_port or free_port())
        click.echo(f"broker     {broker.bootstrap_servers} (Tansu, in memory; pid {broker.process.pid}; "
                   f"log {broker.log_path})")
        ensure_topics(settings)
        tracker = TrackerProcess(settings, work / "tracker.log").start(wait=False)
        click.echo(f"tracker    faust -A app worker (pid {tracker.process.pid}; log {tracker.log_path})")
        tracker.wait_ready(timeout_s=120)
        click.echo(f"web view   {tracker.url}/kmq/ui   (API {tracker.url}/kmq/api/queues, "
                   f"metrics {tracker.url}/metrics)")
        if demo and not stop.is_set():
            from kmq.dev.demo import run_demo
            click.echo("demo       sending to orders, emails, payments ...")
            with Client(settings=settings) as client:
                report = run_demo(client)
            for line in report.lines():
                click.echo(f"           {line}")
        click.echo(f"env        export KMQ_BOOTSTRAP_SERVERS={broker.bootstrap_servers} KMQ_PROFILE=embedded "
                   f"KMQ_TRACKER_URL={tracker.url}")  # kmq stats asks the tracker, on any port
        if not exit_after_demo:
            click.echo("running; Ctrl-C stops the tracker and the broker")
            while not stop.wait(0.5):
                if tracker.process is None or tracker.process.poll() is not None:
                    raise KmqError(f"tracker worker exited; log: {tracker.log_path}")
    except KmqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        if tracker is not None:
            tracker.stop()
        broker.stop()
        click.echo("stopped")


@main.command("config-reference")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write to this file (default: print).")
def config_reference(out: str | None) -> None:
    """The KMQ_* configuration reference (Markdown), generated from the settings."""
    from kmq.config_reference import reference_markdown
    text = reference_markdown()
    if out:
        try:
            Path(out).write_text(text)
        except OSError as exc:
            click.echo(f"error: cannot write {out}: {exc.strerror or exc}: give --out a path in an "
                       "existing, writable directory", err=True)
            sys.exit(1)
    else:
        click.echo(text, nl=False)


@main.command("acls")
@click.option("--update", "update", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Rewrite the checklist (and commands) between the acl markers of this file (repeatable).")
@click.option("--commands", is_flag=True, help="Print kafka-acls.sh commands instead of the table.")
@click.option("--principal", "principals", multiple=True, metavar="ROLE=PRINCIPAL",
              help="With --commands: the principal of a role, e.g. 'consumer=User:orders-app' "
                   "(repeatable; default User:kmq-<role>).")
@click.option("--bootstrap-server", default="$BOOTSTRAP", show_default=True,
              help="With --commands: the --bootstrap-server the commands name.")
def acls(update: tuple[str, ...], commands: bool, principals: tuple[str, ...], bootstrap_server: str) -> None:
    """The Kafka ACLs each role needs (Markdown), with the names the KMQ_* settings give.

    The docs carry the default names: --update renders those, whatever KMQ_* says.
    """
    from kmq.kafka.acls import acl_commands, checklist_markdown, with_checklist
    from kmq.settings import Settings
    if update and (commands or principals or bootstrap_server != "$BOOTSTRAP"):
        # --update renders the docs' default checklist: the others were ignored, silently
        raise click.UsageError("--update rewrites files with the default checklist: give it without "
                               "--commands, --principal and --bootstrap-server")
    for path in update:
        try:
            text = with_checklist(Path(path).read_text(), Settings())
        except ValueError as exc:  # no markers: a traceback before, nothing written
            raise click.BadParameter(f"{path}: {exc}; add them where the checklist goes",
                                     param_hint="--update") from exc
        Path(path).write_text(text)
    if update:
        return
    try:
        settings = Settings.from_env()  # a bad KMQ_* value: one error line, not a traceback
    except KmqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if not commands:
        if principals or bootstrap_server != "$BOOTSTRAP":  # they shape commands only: said, not dropped
            raise click.UsageError("--principal and --bootstrap-server go with --commands: add --commands")
        click.echo(checklist_markdown(settings), nl=False)
        return
    if not bootstrap_server.strip():  # commands with an empty --bootstrap-server fail in kafka-acls.sh
        raise click.BadParameter("give the brokers' host:port, e.g. broker1:9092",
                                 param_hint="--bootstrap-server")
    given = dict(p.split("=", 1) for p in principals if "=" in p)
    if len(given) != len(principals):
        roles = [p.split("=", 1)[0] for p in principals if "=" in p]
        twice = sorted({r for r in roles if roles.count(r) > 1})
        raise click.BadParameter(f"role {twice[0]!r} given twice: give each role once" if twice else
                                 "use ROLE=PRINCIPAL, e.g. consumer=User:orders-app", param_hint="--principal")
    try:
        click.echo(acl_commands(settings, given, bootstrap_server), nl=False)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--principal") from exc


def _port_free(port: int) -> bool:
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# `kmq send | receive | stats | dlq | queue | bench` (rich is imported when they print).
from kmq.dev.bench import bench as _bench  # noqa: E402
from kmq.cli.dlq import dlq as _dlq  # noqa: E402
from kmq.cli.ops import COMMANDS as _ops  # noqa: E402
from kmq.cli.queues import COMMANDS as _queues  # noqa: E402
from kmq.cli.worker import worker as _worker  # noqa: E402
for _command in (*_ops, _dlq, *_queues, _bench, _worker):
    main.add_command(_command)

# `kmq spark ...` (click only here; pyspark is imported when a job runs).
from kmq.spark.cli import spark as _spark  # noqa: E402
main.add_command(_spark)

if __name__ == "__main__":  # pragma: no cover
    main()

"""``kmq spark <job> --out DIR``: the report jobs on kmq's topics, written as Parquet.

Topics and the broker come from ``KMQ_*`` settings (``--bootstrap-servers``
overrides); each job writes ``DIR/<job>/`` (Parquet) and prints its first
rows. pyspark is imported only when a job runs, so ``kmq --help`` works
without the ``spark`` extra.

Like the other broker commands (kmq/cli/connect.py), a job first checks that a
broker answers within ``--connect-timeout-s``, and a failure is one
``error: ...`` line and exit status 1: a kmq error raised inside the data
source reaches the driver wrapped in a Spark exception, and its message is
taken back out of it (:func:`spark_error_message`).
"""

from __future__ import annotations

import importlib
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from kmq.cli.option_checks import positive_seconds
from kmq.errors import ConfigError, KmqError


class Inputs:
    """Lazily read DataFrames of kmq's topics for one job run."""

    def __init__(self, spark: Any, settings: Any) -> None:
        self.spark = spark
        self.settings = settings

    @property
    def jobs(self) -> Any:
        """:mod:`kmq.spark.jobs`, imported once the broker answered and Spark runs."""
        from kmq.spark import jobs

        return jobs

    def topic(self, name: str, headers: bool = False) -> Any:
        from kmq.spark.session import kafka_reader

        return kafka_reader(self.spark, settings=self.settings, subscribe=name,
                            includeHeaders=headers).load()

    def events(self) -> Any:
        from kmq.spark.events import marker_events

        return marker_events(self.topic(self.settings.markers_topic))

    def queue_records(self) -> Any:
        from kmq.spark.events import queue_records

        return queue_records(self.topic(self.settings.queue_topic, headers=True))

    def dead_letters(self) -> Any:
        from kmq.spark.events import dead_letters

        return dead_letters(self.topic(self.settings.dlq_topic, headers=True))

    def state(self) -> Any:
        from confluent_kafka.admin import AdminClient

        from kmq.kafka.profiles import client_config
        from kmq.spark.changelog import inflight_state, tracker_changelog_topic

        topic = tracker_changelog_topic(self.settings.app_id)
        if topic not in AdminClient(client_config(self.settings)).list_topics(timeout=10).topics:
            # A different KMQ_APP_ID than the tracker's is the usual cause: say so.
            raise ConfigError(f"no topic {topic!r}, the tracker's changelog for KMQ_APP_ID="
                              f"{self.settings.app_id!r}: set KMQ_APP_ID to the tracker's (its changelog "
                              "is <KMQ_APP_ID>-tracker-changelog), or start the tracker first")
        return inflight_state(self.topic(topic))


@click.group("spark")
def spark() -> None:
    """Spark reports on kmq's topics (needs the extra: pip install 'kmq[spark]')."""
    from importlib.util import find_spec

    missing = [m for m in ("pyspark", "pyarrow") if find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"kmq spark needs {', '.join(missing)}: pip install 'kmq[spark]' (and Java 17+)")


# Spark's own forms: whitespace may stand around the commas; local[0] starts no thread.
_LOCAL_MASTER = re.compile(r"local(\[(?P<threads>\d+|\*)(\s*,\s*\d+)?\])?"
                           r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]")


def _check_master(ctx: click.Context, param: click.Parameter, value: str) -> str:
    # Spark's own refusal comes after the broker check and the JVM's start, as
    # "Java gateway process exited before sending its port number".
    if value == "yarn" or value.startswith(("spark://", "k8s://")):
        return value
    local = _LOCAL_MASTER.fullmatch(value)
    if local and local["threads"] not in (None, "*") and int(local["threads"]) == 0:
        raise click.BadParameter(f"{value!r} runs no thread: use local[N] with N of 1 or more, "
                                 "or local[*]")
    if local:
        return value
    raise click.BadParameter(f"{value!r} is not a Spark master URL: use local[N], local[*], "
                             "spark://HOST:PORT, k8s://HOST:PORT or yarn")


def job_options(fn: Callable) -> Callable:
    """The options every job takes: --out, --bootstrap-servers, --connect-timeout-s, --master,
    --show."""
    for option in reversed([
        click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
                     help="Directory for the results (DIR/<job>/ as Parquet)."),
        click.option("--bootstrap-servers", default=None,
                     help="Kafka bootstrap servers (else KMQ_BOOTSTRAP_SERVERS)."),
        # > 0: librdkafka waits for ever on a negative timeout.
        click.option("--connect-timeout-s", default=10.0, show_default=True, type=float,
                     callback=positive_seconds,
                     help="How long to wait for a broker before giving up (seconds, > 0)."),
        click.option("--master", default="local[2]", show_default=True, callback=_check_master,
                     help="Spark master URL: local[N], local[*], spark://HOST:PORT, k8s://..., yarn."),
        click.option("--show", default=20, show_default=True, type=click.IntRange(min=0),
                     help="Rows to print (0: none)."),
    ]):
        fn = option(fn)
    return fn


def _run(job: str, build: Callable[[Inputs], Any], out_dir: str, bootstrap_servers: str | None,
         connect_timeout_s: float, master: str, show: int) -> None:
    # Imported here: kmq.cli imports this module while it loads.
    from kmq.cli.connect import check_broker, fail

    try:
        from kmq.settings import Settings
        settings = Settings.from_env(bootstrap_servers=bootstrap_servers)
        # Before Spark starts: else a dead address costs the JVM's start plus the data
        # source's own wait for the broker (up to 60 s), with librdkafka logging all along.
        check_broker(settings, connect_timeout_s)
        from kmq.spark.session import local_session
        session = local_session(master=master, app_name=f"kmq-{job}")
        # A failure is our one error line; Spark's ERROR logs repeat it with pages of stack.
        session.sparkContext.setLogLevel("FATAL")
        df = build(Inputs(session, settings)).cache()
        path = Path(out_dir) / job
        df.write.mode("overwrite").parquet(str(path))
        rows = df.count()
        if show:
            click.echo(shown_rows(df, show), nl=False)
        click.echo(f"{job}: {rows} rows -> {path}")
    except KmqError as exc:
        fail(str(exc))
    except Exception as exc:
        message = spark_error_message(exc)
        if message is None:  # not from Spark: a bug, keep its traceback
            raise
        fail(message)


def shown_rows(df: Any, n: int) -> str:
    """``df.show(n)``'s table with what a topic's writers chose (queue names, reasons) escaped
    as the other commands print it: Spark prints control and bidi characters as they are."""
    import contextlib
    import io

    from kmq.cli.connect import printable
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.show(n, truncate=False)
    return printable(out.getvalue(), newlines=True)


# A traceback's exception line: "kmq.errors.ConfigError: option ... is ...".
_ERROR_LINE = re.compile(r"^(kmq(?:\.\w+)*)\.(\w+): (.+)$", re.MULTILINE)
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
_TRACEBACK = "Traceback (most recent call last):"


def kmq_error_message(text: str) -> str | None:
    """The message of the last kmq error in traceback text Spark passed on, else None.

    Errors raised in the data source (planning on the driver's Python worker, reading
    on executors) reach the driver as pyspark or Py4J exceptions whose text holds the
    Python traceback; only names that are :class:`KmqError` subclasses count.
    """
    for module, name, message in reversed(_ERROR_LINE.findall(text)):
        try:
            cls = getattr(sys.modules.get(module) or importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, KmqError):
            return _SQLSTATE.sub("", message).strip()
    return None


def spark_error_message(exc: BaseException) -> str | None:
    """One line for an exception from pyspark or Py4J (None for any other exception)."""
    if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
        return None
    text = str(exc)
    found = kmq_error_message(text)
    if found is not None:
        return found
    return f"the Spark job failed: {_python_error_line(text) or _first_line(exc, text)}"


def _python_error_line(text: str) -> str | None:
    """``Name: message`` of the last Python traceback in ``text`` (a Python worker's error)."""
    if _TRACEBACK not in text:
        return None
    # The exception line is the first one of the traceback that is not indented.
    for line in text.rsplit(_TRACEBACK, 1)[1].splitlines()[1:]:
        if line.strip() and not line[0].isspace():
            return _SQLSTATE.sub("", line).strip()
    return None


def _first_line(exc: BaseException, text: str) -> str:
    # Py4J's first line names only the JVM call ("An error occurred while calling o51.parquet.").
    lines = [ln.strip().lstrip(": ") for ln in text.splitlines()
             if ln.strip() and not ln.startswith("An error occurred while calling")]
    return _SQLSTATE.sub("", lines[0]) if lines else type(exc).__name__


def _now_ms() -> int:
    return int(time.time() * 1000)


AS_OF = click.option("--as-of-ms", type=click.IntRange(min=1), default=None,
                     help="The moment deadlines are judged at (default: now).")


@spark.command()
@job_options
def percentiles(**common: Any) -> None:
    """Processing-time percentiles (START to ACK) per queue, from the markers."""
    _run("percentiles", lambda i: i.jobs.percentiles(i.jobs.deliveries(i.events(), _now_ms())),
         **common)


@spark.command()
@AS_OF
@job_options
def rates(as_of_ms: int | None, **common: Any) -> None:
    """Redelivery and dead-letter rates per queue and reason."""
    _run("rates", lambda i: i.jobs.rates(i.jobs.deliveries(i.events(), as_of_ms or _now_ms()),
                                         i.dead_letters(), i.queue_records()), **common)


@spark.command("dead-letters")
@job_options
def dead_letters(**common: Any) -> None:
    """Dead letters per queue and reason: count, attempts, age."""
    _run("dead-letters", lambda i: i.jobs.dead_letter_summary(i.dead_letters()), **common)


@spark.command("never-acked")
@AS_OF
@job_options
def never_acked(as_of_ms: int | None, **common: Any) -> None:
    """Messages none of whose deliveries was acked, and what became of them."""
    _run("never-acked", lambda i: i.jobs.never_acked(
        i.jobs.deliveries(i.events(), as_of_ms or _now_ms()), i.queue_records(), i.dead_letters()),
        **common)


@spark.command()
@AS_OF
@click.option("--grace-ms", type=click.IntRange(min=0), default=0, show_default=True,
              help="Only entries overdue by more than this.")
@job_options
def overdue(as_of_ms: int | None, grace_ms: int, **common: Any) -> None:
    """In-flight messages and scheduled sends past their deadline (tracker's changelog)."""
    _run("overdue", lambda i: i.jobs.overdue(i.state(), as_of_ms or _now_ms(), grace_ms),
         **common)


@spark.command()
@job_options
def inflight(**common: Any) -> None:
    """The tracker's in-flight state rebuilt from its changelog (one row per entry)."""
    _run("inflight", lambda i: i.state().drop("value"), **common)


@spark.command()
@click.option("--topic", required=True, help="The changelog topic of the table.")
@click.option("--codec", type=click.Choice(["raw", "faust-json", "tracker"]), default="raw",
              show_default=True, help="How keys and values are encoded.")
@job_options
def snapshot(topic: str, codec: str, **common: Any) -> None:
    """Snapshot a table (latest value per key, tombstones applied) from its changelog."""
    def build(i: Inputs) -> Any:
        from kmq.spark.changelog import decode_faust_json, inflight_state, latest_per_key

        records = i.topic(topic)
        if codec == "tracker":
            return inflight_state(records)
        latest = latest_per_key(records)
        return decode_faust_json(latest) if codec == "faust-json" else latest
    _run("snapshot", build, **common)

"""``kmq spark <job> --out DIR``: the report jobs on kmq's topics, written as Parquet.

Topics and the broker come from ``KMQ_*`` settings (``--bootstrap-servers``
overrides); each job writes ``DIR/<job>/`` (Parquet) and prints its first
rows. pyspark is imported only when a job runs, so ``kmq --help`` works
without the ``spark`` extra.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import click

from kmq.errors import KmqError


class Inputs:
    """Lazily read DataFrames of kmq's topics for one job run."""

    def __init__(self, spark: Any, settings: Any) -> None:
        self.spark = spark
        self.settings = settings

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
        from kmq.spark.changelog import inflight_state, tracker_changelog_topic

        return inflight_state(self.topic(tracker_changelog_topic(self.settings.app_id)))


@click.group("spark")
def spark() -> None:
    """Spark reports on kmq's topics (needs the extra: pip install 'kmq[spark]')."""
    from importlib.util import find_spec

    missing = [m for m in ("pyspark", "pyarrow") if find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"kmq spark needs {', '.join(missing)}: pip install 'kmq[spark]' (and Java 17+)")


def job_options(fn: Callable) -> Callable:
    """The options every job takes: --out, --bootstrap-servers, --master, --show."""
    for option in reversed([
        click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
                     help="Directory for the results (DIR/<job>/ as Parquet)."),
        click.option("--bootstrap-servers", default=None,
                     help="Kafka bootstrap servers (else KMQ_BOOTSTRAP_SERVERS)."),
        click.option("--master", default="local[2]", show_default=True, help="Spark master URL."),
        click.option("--show", default=20, show_default=True, help="Rows to print (0: none)."),
    ]):
        fn = option(fn)
    return fn


def _run(job: str, build: Callable[[Inputs], Any], out_dir: str, bootstrap_servers: str | None,
         master: str, show: int) -> None:
    try:
        from kmq.settings import Settings
        settings = Settings.from_env(bootstrap_servers=bootstrap_servers)
        from kmq.spark.session import local_session
        session = local_session(master=master, app_name=f"kmq-{job}")
        df = build(Inputs(session, settings)).cache()
        path = Path(out_dir) / job
        df.write.mode("overwrite").parquet(str(path))
        rows = df.count()
        if show:
            df.show(show, truncate=False)
        click.echo(f"{job}: {rows} rows -> {path}")
    except KmqError as exc:
        raise click.ClickException(str(exc)) from exc


def _now_ms() -> int:
    return int(time.time() * 1000)


AS_OF = click.option("--as-of-ms", type=int, default=None,
                     help="The moment deadlines are judged at (default: now).")


@spark.command()
@job_options
def percentiles(**common: Any) -> None:
    """Processing-time percentiles (START to ACK) per queue, from the markers."""
    from kmq.spark import jobs
    _run("percentiles", lambda i: jobs.percentiles(jobs.deliveries(i.events(), _now_ms())),
         **common)


@spark.command()
@AS_OF
@job_options
def rates(as_of_ms: int | None, **common: Any) -> None:
    """Redelivery and dead-letter rates per queue and reason."""
    from kmq.spark import jobs
    _run("rates", lambda i: jobs.rates(jobs.deliveries(i.events(), as_of_ms or _now_ms()),
                                       i.dead_letters(), i.queue_records()), **common)


@spark.command("dead-letters")
@job_options
def dead_letters(**common: Any) -> None:
    """Dead letters per queue and reason: count, attempts, age."""
    from kmq.spark import jobs
    _run("dead-letters", lambda i: jobs.dead_letter_summary(i.dead_letters()), **common)


@spark.command("never-acked")
@AS_OF
@job_options
def never_acked(as_of_ms: int | None, **common: Any) -> None:
    """Messages none of whose deliveries was acked, and what became of them."""
    from kmq.spark import jobs
    _run("never-acked", lambda i: jobs.never_acked(
        jobs.deliveries(i.events(), as_of_ms or _now_ms()), i.queue_records(), i.dead_letters()),
        **common)


@spark.command()
@AS_OF
@click.option("--grace-ms", type=int, default=0, show_default=True,
              help="Only entries overdue by more than this.")
@job_options
def overdue(as_of_ms: int | None, grace_ms: int, **common: Any) -> None:
    """In-flight messages and scheduled sends past their deadline (tracker's changelog)."""
    from kmq.spark import jobs
    _run("overdue", lambda i: jobs.overdue(i.state(), as_of_ms or _now_ms(), grace_ms), **common)


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
    from kmq.spark.changelog import decode_faust_json, inflight_state, latest_per_key

    def build(i: Inputs) -> Any:
        records = i.topic(topic)
        if codec == "tracker":
            return inflight_state(records)
        latest = latest_per_key(records)
        return decode_faust_json(latest) if codec == "faust-json" else latest
    _run("snapshot", build, **common)

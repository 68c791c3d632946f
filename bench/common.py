"""Shared pieces of the benchmarks: an embedded broker + tracker stack, timing, reporting."""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from kmq.kafka.admin import ensure_topics
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.settings import Settings

RESULTS = Path(__file__).parent / "results"


def machine() -> str:
    cpus = os.cpu_count()
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {cpus} cores, {mem_gib:.0f} GiB, Python {platform.python_version()}"


@contextmanager
def stack(tracker: bool = True, **overrides):
    """An embedded broker (and a tracker worker) on free loopback ports."""
    work = Path(tempfile.mkdtemp(prefix="kmq-bench-"))
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        values = dict(bootstrap_servers=broker.bootstrap_servers, profile="embedded",
                      data_dir=str(work / "data"), web_port=free_port(), queue_partitions=8,
                      markers_partitions=8)
        values.update(overrides)
        if "KMQ_TRACKER_GC_THRESHOLD" in os.environ:  # A/B runs of the tracker's collector setting
            values.setdefault("tracker_gc_threshold", int(os.environ["KMQ_TRACKER_GC_THRESHOLD"]))
        settings = Settings.from_env({}, **values)
        ensure_topics(settings)
        proc = None
        if tracker:
            proc = TrackerProcess(settings, work / "tracker.log").start(timeout_s=120)
        try:
            yield settings, proc, broker
        finally:
            if proc is not None:
                proc.stop()


PAYLOADS = ("repeated", "random")


def payloads(kind: str, size: int, n: int) -> list[bytes]:
    """``n`` payloads of ``size`` bytes: one repeated byte (compresses to almost nothing), or
    random, each message its own (one random payload repeated would compress across a batch)."""
    if kind == "random":
        return [os.urandom(size) for _ in range(n)]
    return [b"x" * size] * n


def median(xs):
    return statistics.median(xs)


# Environment variables a benchmark's children read: shown before the command that ran with them.
COMMAND_ENV = ("KMQ_TRACKER_GC_THRESHOLD", "BENCH_CONSUMER_GC_THRESHOLD")


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    if "command" in payload:
        env = " ".join(f"{k}={os.environ[k]}" for k in COMMAND_ENV if k in os.environ)
        payload = {**payload, "command": f"{env} {payload['command']}".strip()}
    payload = {"machine": machine(), "when": time.strftime("%Y-%m-%d %H:%M:%S"), **payload}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path

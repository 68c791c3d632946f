"""How fast a live tracker works through a flood on its markers partition, and what it delays.

    python -m bench.garbage_flood [--records 100000] [--runs 2]

A whole stack on the embedded broker (one markers partition). Per run, two floods of
``--records`` records each, written in large batches: *garbage* (random bytes that no
codec version decodes: each is counted and copied to the dead-letter topic) and, as the
baseline of the same run, *no-op markers* (ACKs of ranges nobody started: decoded, applied,
counted ``unknown-range``). For each: records a second from the flood written to the last
one counted (``/kmq/health``), the tracker's CPU per record (psutil), and how late a
message whose visibility timeout ran out during the flood was redelivered (behind the
flood on its partition). Prints and saves ``garbage_flood`` to bench/results.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import urllib.request

import psutil
from confluent_kafka import Producer

import kmq
from bench.common import save, stack
from kmq.errors import MarkerDecodeError
from kmq.protocol import marker_codec
from kmq.protocol import markers as M

VISIBILITY_S = 2.0


def garbage(n: int, rng: random.Random) -> list[bytes]:
    out = []
    while len(out) < n:
        value = rng.randbytes(rng.randint(1, 64))
        try:
            marker_codec.decode(value)
        except MarkerDecodeError:
            out.append(value)
    return out


def noop_markers(n: int) -> list[bytes]:
    return [marker_codec.encode([M.Ack(M.RangeRef("filler", 0, 10 * i, 10 * i + 1), 1)]) for i in range(n)]


def health(tracker) -> dict:
    with urllib.request.urlopen(tracker.url + "/kmq/health", timeout=30) as r:
        return json.loads(r.read())


def flood(settings, tracker, client, queue: str, values: list[bytes], reason: str) -> dict:
    """Write ``values`` behind a delivery whose visibility timeout runs out meanwhile; time both."""
    worker = psutil.Process(tracker.process.pid)
    before = health(tracker)["set_aside"][reason]
    client.send(queue, b"behind the flood")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=VISIBILITY_S) as consumer:
        first = None
        while first is None:
            first = consumer.receive(1.0)
        due_s = time.monotonic() + VISIBILITY_S
        raw = Producer({**settings.client_config(), "linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
        for i, value in enumerate(values):
            raw.produce(settings.markers_topic, value, b"flood", partition=0)
            if i % 10_000 == 0:
                raw.poll(0)
        while raw.flush(5):
            pass
        written = time.monotonic()
        cpu0 = sum(worker.cpu_times()[:2])
        redelivered_s = None
        while True:
            m = consumer.receive(0.1)
            if m is not None and redelivered_s is None:
                redelivered_s = time.monotonic() - due_s
                m.ack()
            counted = health(tracker)["set_aside"][reason] - before
            if counted >= len(values):
                break
        done = time.monotonic()
        cpu = sum(worker.cpu_times()[:2]) - cpu0
        while redelivered_s is None:
            m = consumer.receive(0.1)
            if m is not None:
                redelivered_s = time.monotonic() - due_s
                m.ack()
    return {"records": len(values), "records_per_s": round(len(values) / (done - written)),
            "tracker_cpu_us_per_record": round(cpu / len(values) * 1e6, 1),
            "redelivered_late_s": round(redelivered_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--name", default="", help="saved as garbage_flood-NAME (every invocation kept)")
    args = ap.parse_args()
    rng = random.Random(7)
    bad, noop = garbage(args.records, rng), noop_markers(args.records)
    runs = []
    with stack(queue_partitions=1, markers_partitions=1, dlq_partitions=1, dispatch="shared",
               max_processing_s=0.0) as (settings, tracker, _broker):
        with kmq.Client(settings=settings) as client:
            for run in range(args.runs):
                for kind, values, reason in (("garbage", bad, "malformed-marker"), ("no-op", noop, "unknown-range")):
                    r = {"run": run + 1, "kind": kind, **flood(settings, tracker, client, "q", values, reason)}
                    print(json.dumps(r), flush=True)
                    runs.append(r)
    save("garbage_flood" + (f"-{args.name}" if args.name else ""), {
        "command": f"python -m bench.garbage_flood --records {args.records} --runs {args.runs}", "runs": runs})


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for every ``garbage_flood`` result file."""
    files = sorted(((name, r) for name, r in results.items() if name.split("-")[0] == "garbage_flood"),
                   key=lambda item: item[1]["when"])
    if not files:
        return []
    out = ["## The tracker behind a flood on its markers partition", "",
           "Records a second a live tracker works through (one markers partition, large batches):",
           "garbage (counted, copied to the dead-letter topic) against no-op markers of the same run",
           "(ACKs of ranges never started), its CPU per record, and how late a message whose",
           "visibility timeout ran out during the flood was redelivered.", "",
           "| result file | run | kind | records | records/s | garbage / no-op | tracker CPU us / record | redelivered late (s) |",
           "|---|---|---|---|---|---|---|---|"]
    for name, r in files:
        rate = {(v["run"], v["kind"]): v["records_per_s"] for v in r["runs"]}
        for v in r["runs"]:
            ratio = (f"**{v['records_per_s'] / rate[(v['run'], 'no-op')]:.2f}**"
                     if v["kind"] == "garbage" and (v["run"], "no-op") in rate else "")
            out.append(f"| `{name}` ({r['when'][:16]}) | {v['run']} | {v['kind']} | {v['records']:,} | {v['records_per_s']:,} | "
                       f"{ratio} | {v['tracker_cpu_us_per_record']} | {v['redelivered_late_s']} |")
    last = files[-1][1]
    return out + ["", f"Source: `{last['command']}` ({last['machine']}). 2026-11-28, first session: `-main-N`,",
                  "the code then, alternating with `-trial-N`, the drain's fast path on trial; second session:",
                  "`-fastpath-N`, the fast path adopted (`app/drain_fast_path.py`), alternating with `-head-N`,",
                  "the code before it (docs/reliability.md, \"A flood on the markers topic\").", ""]


if __name__ == "__main__":
    main()

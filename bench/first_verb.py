"""How late a new shared consumer's first verb is: its marker producer started or not.

    python -m bench.first_verb [--consumers 12] [--delay-s 1]

Each round opens a new consumer of a new shared queue, receives its one message and
releases it with ``--delay-s``; the message comes back ``delay + lateness`` later. The
release is the consumer's first marker through its idempotent producer, which waited for
librdkafka's producer id (kmq/kafka/producer_start.py). Rounds alternate the producer as
kmq makes it (``started_producer``: connected as it is made) with a bare ``Producer``
(the code before), in one process against one stack, so the pair shares the machine's
noise. Prints each variant's lateness in ms (every round, p50 and max).
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Producer

import kmq
import kmq.consumer.marker_writer as marker_writer
from bench.common import save, stack
from bench.report_format import runs_of, table_head


def bare_producer(conf: dict, _topic: str) -> Producer:
    return Producer(conf)


def late_ms(client: kmq.Client, queue: str, delay_s: float) -> int:
    """The first release's lateness of a new consumer of ``queue`` (one message sent)."""
    client.configure_queue(queue, dispatch="shared")
    client.send(queue, b"x")
    client.flush()
    with client.consumer(queue) as c:
        m = c.receive(timeout_s=20)
        released = time.monotonic()
        m.release(delay_s=delay_s)
        again = c.receive(timeout_s=delay_s + 15)
        back = time.monotonic()
        again.ack()
    return round((back - released - delay_s) * 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--consumers", type=int, default=12, help="rounds of each variant")
    ap.add_argument("--delay-s", type=float, default=1.0)
    ap.add_argument("--label", default="", help="saved as first_verb-LABEL")
    args = ap.parse_args()
    variants = {"started": marker_writer.started_producer, "bare": bare_producer}
    late: dict[str, list[int]] = {name: [] for name in variants}
    with stack(dispatch="shared") as (settings, _tracker, _broker):
        client = kmq.Client(settings=settings)
        for i in range(args.consumers):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:
                marker_writer.started_producer = variants[name]
                late[name].append(late_ms(client, f"first-verb-{name}-{i}", args.delay_s))
        client.close()
    for name, ms in late.items():
        print(f"{name}: lateness p50 {statistics.median(ms):.0f} ms, max {max(ms)} ms, every round {ms}")
    save(f"first_verb{'-' + args.label if args.label else ''}",
         {"command": f"python -m bench.first_verb --consumers {args.consumers} --delay-s {args.delay_s:g}",
          "late_ms": late})


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for every ``first_verb`` result file, oldest first."""
    runs = runs_of(results, "first_verb")
    if not runs:
        return []
    out = ["## A new shared consumer's first verb (`bench.first_verb`)", "",
           "How late a new consumer's first `release(delay_s)` comes back: its marker producer",
           "made connected (`started`, kmq/kafka/producer_start.py) or bare (the code before, which",
           "waited for librdkafka's 500 ms producer-id timer). Rounds alternate, one stack.", "",
           *table_head("when", "command", "machine", "started p50 / max ms", "bare p50 / max ms",
                       "every round (started; bare)")]
    for r in runs:
        s, b = r["late_ms"]["started"], r["late_ms"]["bare"]
        out.append(f"| {r['when']} | `{r['command']}` | {r['machine']} | {statistics.median(s):.0f} / {max(s)} | "
                   f"{statistics.median(b):.0f} / {max(b)} | {s}; {b} |")
    return out + [""]

if __name__ == "__main__":
    main()

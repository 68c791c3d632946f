"""What each producer codec costs the sender: ``send_batch`` + ``flush`` of random payloads.

    python -m bench.send_codecs [--messages 300000] [--rounds 3] [--codecs lz4,zstd,none]

The SDK compresses each batch it sends (``KMQ_COMPRESSION``), so a codec that stores
fewer bytes (docs/shared-queues.md, "Read amplification and bytes written") may cost
the sender CPU. One embedded broker, no tracker; per round every codec in turn, 100 B
and 1 KiB payloads, each message its own random bytes (one payload repeated would
compress to nothing). Rate = messages / (send_batch + flush), CPU = this process's.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import kmq
from bench.common import payloads, save, stack

SIZES = (100, 1024)


def send_once(settings, codec: str, size: int, n: int, queue: str) -> dict:
    client = kmq.Client(settings=dataclasses.replace(settings, compression=codec))
    try:
        random_payloads = payloads("random", size, n)
        t0, cpu0 = time.perf_counter(), time.process_time()
        client.send_batch(queue, random_payloads)
        if client.flush(300):
            raise SystemExit(f"{codec}: records not written within 300 s")
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        client.close()
    return {"msgs_s": n / wall, "cpu_us_per_msg": cpu * 1e6 / n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--codecs", default="lz4,zstd,none")
    args = ap.parse_args()
    codecs = args.codecs.split(",")
    runs: dict[str, dict[str, list]] = {f"{c} {s}": {"msgs_s": [], "cpu_us_per_msg": []}
                                        for c in codecs for s in SIZES}
    with stack(tracker=False, queue_partitions=16) as (settings, _tracker, _broker):
        for rnd in range(args.rounds):
            for codec in codecs:
                for size in SIZES:
                    got = send_once(settings, codec, size, args.messages, f"send-{codec}-{size}-{rnd}")
                    for k, v in got.items():
                        runs[f"{codec} {size}"][k].append(round(v, 2))
                    print(f"round {rnd} {codec} {size} B: {got['msgs_s']:,.0f} msgs/s, "
                          f"{got['cpu_us_per_msg']:.2f} us CPU/msg", flush=True)
    path = save("send_codecs", {
        "command": f"python -m bench.send_codecs --messages {args.messages} --rounds {args.rounds} "
                   f"--codecs {args.codecs}", "runs": runs})
    print(f"saved {path}")


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for ``send_codecs``."""
    r = results.get("send_codecs")
    if r is None:
        return []
    out = ["## The sender's cost of each codec", "",
           "`send_batch` + `flush` of random payloads (each message its own bytes), one embedded",
           "broker, no tracker; every codec in turn each round. Medians, every run in brackets.", "",
           "| codec | size | msgs/s (runs) | CPU us / message (runs) |", "|---|---|---|---|"]
    for key, v in r["runs"].items():
        codec, size = key.split()
        out.append(f"| {codec} | {size} B | {statistics.median(v['msgs_s']) / 1000:,.0f}k "
                   f"({', '.join(f'{x / 1000:,.0f}k' for x in v['msgs_s'])}) | "
                   f"**{statistics.median(v['cpu_us_per_msg']):.2f}** "
                   f"({', '.join(f'{x:.2f}' for x in v['cpu_us_per_msg'])}) |")
    return out + ["", f"Source: `{r['command']}` ({r['machine']}; {r['when']})", ""]


if __name__ == "__main__":
    main()

"""How fast the broker hands a partition to several readers at once, each a part of it.

    python -m bench.broker_split_read [--records 200000] [--size 100] [--readers 1,2,4] [--rounds 3]

The embedded broker alone (no tracker, no kmq code), records written as bench.broker_fetch
writes them (a queue key, a ``kmq.id`` header) to one partition. Each round reads all of
them once per reader count k, on a topic of its own written just before (records never
read before, as a flood's): k librdkafka consumers, each in its own thread, read one
k-th of the offsets (consecutive parts, as a dispatcher prefetching ahead of its cursor
would split a backlog), from the start of the round to the last reader's end. The order
of the counts alternates between rounds. Reports records a second: whether a partition
behind by a burst could be read faster than one reader gets it (docs/shared-queues.md,
"First message and latency").
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.broker_fetch import CHUNK_RECORDS, FETCH_QUEUE_BACKOFF_MS, create_topic, fill
from bench.common import median, save
from kmq.dev.embedded import EmbeddedBroker

READ_DEADLINE_S = 300.0


def read_part(bootstrap: str, topic: str, start: int, count: int, done_at: list[float],
              errors: list[BaseException]) -> None:
    """Read ``count`` records from ``start``; note when the last one came."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-split-{start}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                  "queued.max.messages.kbytes": 16 * 1024,
                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS})  # as the dispatcher's reader
    try:
        c.assign([TopicPartition(topic, 0, start)])
        got, deadline = 0, time.monotonic() + READ_DEADLINE_S
        while got < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {got} of {count} records from offset {start} in {READ_DEADLINE_S:g} s")
            got += sum(1 for r in c.consume(min(CHUNK_RECORDS, count - got), 0.05) if r.error() is None)
        done_at.append(time.perf_counter())
    except BaseException as exc:  # the main thread reports it
        errors.append(exc)
    finally:
        c.close()


def split_read(bootstrap: str, topic: str, records: int, readers: int) -> float:
    """Records a second with ``readers`` consumers, each reading its consecutive part."""
    bounds = [records * i // readers for i in range(readers + 1)]
    done_at: list[float] = []
    errors: list[BaseException] = []
    threads = [threading.Thread(target=read_part, args=(bootstrap, topic, lo, hi - lo, done_at, errors))
               for lo, hi in zip(bounds, bounds[1:])]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return records / (max(done_at) - started)


def positive_ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give counts of at least 1, e.g. 1,2,4")
    return values


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--readers", type=positive_ints, default=[1, 2, 4])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    if args.records < max(args.readers) or args.size < 0 or args.rounds < 1:
        ap.error("--records must be at least the largest --readers, --size at least 0, --rounds at least 1")
    work = Path(tempfile.mkdtemp(prefix="kmq-bench-"))
    runs = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        for rnd in range(args.rounds):
            for k in args.readers if rnd % 2 == 0 else list(reversed(args.readers)):
                # Records never read before, as a flood's are.
                topic = f"split-{rnd}-{k}"
                create_topic(broker.bootstrap_servers, topic)
                fill(broker.bootstrap_servers, topic, args.records, args.size)
                runs.append({"round": rnd + 1, "readers": k,
                             "records_s": round(split_read(broker.bootstrap_servers, topic, args.records, k))})
                print(runs[-1], flush=True)
    one = median([r["records_s"] for r in runs if r["readers"] == args.readers[0]])
    summary = {str(k): round(median([r["records_s"] for r in runs if r["readers"] == k]) / one, 2)
               for k in args.readers}
    path = save("broker_split_read", {
        "command": f"python -m bench.broker_split_read --records {args.records} --size {args.size} "
                   f"--readers {','.join(map(str, args.readers))} --rounds {args.rounds}",
        "note": args.note, "records": args.records, "size": args.size, "runs": runs,
        "median_ratio_to_first": summary})
    print(f"median records/s against {args.readers[0]} reader(s): {summary}; saved {path}")


def section(results: dict[str, dict]) -> list[str]:
    r = results.get("broker_split_read")
    if r is None:
        return []
    first = r["runs"][0]["readers"] if r["runs"] else 1
    out = ["## The embedded broker: one partition read by several readers at once", "",
           f"{r['records']:,} records of {r['size']} B on one partition, a topic written for each reader",
           "count (records never read before); k librdkafka consumers, each in its own thread, read",
           "one k-th of the offsets (consecutive parts); records a second from the start to the last",
           "reader's end, counts alternating between rounds (no tracker; 5 ms `fetch.queue.backoff.ms`",
           "as the dispatcher's reader; docs/shared-queues.md, \"First message and latency\"). "
           f"`{r['command']}` ({r['machine']}; {r['when']})", "",
           "| round | readers | records/s |", "|---|---|---|"]
    for v in r["runs"]:
        out.append(f"| {v['round']} | {v['readers']} | {v['records_s']:,} |")
    ratios = ", ".join(f"{k}: **{x:.2f}**" for k, x in r["median_ratio_to_first"].items())
    out += ["", f"Median records/s against {first} reader(s): {ratios}.", ""]
    return out


if __name__ == "__main__":
    main()

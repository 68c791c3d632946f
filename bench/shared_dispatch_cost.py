"""The dispatcher's CPU per record, in isolation: reading a queue partition and deciding.

    python -m bench.shared_dispatch_cost [--records 300000] [--size 100] [--queues 1] [--chunk 20000]
                                         [--name NAME --note "what code"]

Sends ``--records`` SDK records (``--queues`` queues interleaved on one partition) to an
embedded broker, then times, in this thread only (``time.thread_time``):

- ``read``: the dispatcher reader's consume() of every record (librdkafka's messages);
- ``decide``: what a dispatch round does with them for the first queue's four consumers
  (each with 20,000 credit renewed every round): the read-ahead (``Lookahead``), the
  selection, duplicates, shares and each delivery's reference-or-copy rule, then the trim;
  ``of_which_duplicates``: the part spent looking for ``kmq.dedup-id`` headers.

The partition-mode consumer's own work per record is the yardstick (bench.shared_profile).
With ``--name`` the figures are saved as ``bench/results/shared_dispatch_cost-NAME.json``.
"""

from __future__ import annotations

import argparse
import json
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from agents.dispatch.lanes import delivery_of
from agents.dispatch.reader import CHUNK_RECORDS
from agents.dispatch.ordered import OrderedQueues
from bench.common import save, stack
from kmq.kafka import profiles
from kmq.protocol import markers as M
from kmq.protocol.dispatch import Roster, Want, hand_out
from kmq.protocol.lookahead import Lookahead


def fill(settings, queues: list[str], n: int, size: int) -> None:
    p = Producer({**profiles.client_config(settings), "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for i in range(n):
        q = queues[i % len(queues)]
        while True:
            try:
                p.produce(settings.queue_topic, value, q.encode(), partition=0,
                          headers=[("kmq.id", f"0123456789abcdef{i:x}".encode())])
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def read_all(settings, n: int, chunk: int) -> tuple[list, float]:
    c = Consumer({**profiles.client_config(settings), "group.id": "cost", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "queued.max.messages.kbytes": 16 * 1024})
    c.assign([TopicPartition(settings.queue_topic, 0, 0)])
    chunks, got, cpu = [], 0, 0.0
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        t = time.thread_time()
        recs = c.consume(chunk, 0.05)
        cpu += time.thread_time() - t
        recs = [r for r in recs if r.error() is None]
        if recs:
            chunks.append(recs)
            got += len(recs)
    c.close()
    return chunks, cpu


def decide(chunks: list, queue: str, consumers: int = 4) -> tuple[float, float]:
    """CPU seconds of the dispatcher's decisions over ``chunks`` (see the module docstring),
    and of those the seconds spent looking for duplicates (the records' headers)."""
    key = queue.encode()
    ahead = Lookahead()
    ordered = OrderedQueues()
    roster = Roster(1)
    for i in range(consumers):
        roster.credit(M.Credit(queue, f"c{i:031d}", i, 1, 0, 20000, 5000, 30000), 0)
    cursor = 0
    dedup_s = 0.0
    t = time.thread_time()
    for recs in chunks:
        for s in roster.slots.values():  # every consumer asks again for all it can take
            s.available, s.unconfirmed = 20000, type(s.unconfirmed)()
        ws = {key: Want(queue, cursor, roster.demand())}
        _, seek = ahead.serve(ws)
        if seek is not None:
            ahead.position = seek
        ahead.take(recs, {key}, ws)
        w = ws[key]
        d = time.thread_time()
        w.taken = ordered.drop_duplicates((0, queue, 0), w.taken, 300_000)
        dedup_s += time.thread_time() - d
        for slot, seq, run in hand_out(w, roster):
            delivery_of(run, queue, 0, 1, slot, seq, ahead)
        cursor = w.cursor
        ahead.trim(key, cursor)
    return time.thread_time() - t, dedup_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--queues", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=CHUNK_RECORDS)
    ap.add_argument("--name", default="")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    with stack(tracker=False, queue_partitions=1) as (settings, _t, _b):
        queues = [f"cost-{i}" for i in range(args.queues)]
        fill(settings, queues, args.records, args.size)
        chunks, read_s = read_all(settings, args.records, args.chunk)
        n = sum(len(c) for c in chunks)
        decide_s, dedup_s = decide(chunks, queues[0])
        out = {"records": n, "size": args.size, "queues": args.queues, "chunk": args.chunk,
               "read_us_per_record": round(read_s / n * 1e6, 3),
               "decide_us_per_record": round(decide_s / n * 1e6, 3),
               "of_which_duplicates_us_per_record": round(dedup_s / n * 1e6, 3)}
        print(json.dumps(out))
        if args.name:
            argv = f"--records {args.records} --size {args.size} --queues {args.queues} --chunk {args.chunk}"
            print("saved", save(f"shared_dispatch_cost-{args.name}",
                                {"command": f"python -m bench.shared_dispatch_cost {argv}", "results": out,
                                 **({"note": args.note} if args.note else {})}))


if __name__ == "__main__":
    main()

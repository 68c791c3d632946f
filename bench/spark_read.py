"""Spark batch read throughput: kmq's Kafka source on local[2] vs a plain confluent-kafka read.

One topic of ``--records`` records of ``--size`` bytes (4 partitions) on the
embedded broker, read whole, each run by:

- ``plain``: one process, one confluent-kafka consumer assigned to every
  partition, reading to end-of-partition and touching key, value, offset and
  timestamp of every record (the floor any Python reader pays);
- ``arrow``: kmq's per-task reader (:func:`kmq.spark.fetch.read_range`) in
  this process, one partition after another, building the Arrow batches a
  Spark task returns (no Spark);
- ``spark``: ``spark.read.format("kmq_kafka")`` on ``local[2]``, every
  column materialised (``write.format("noop")``), planning included.

The session start, the first query (Python worker start) and one full
warm-up read (the JVM's JIT: the first full read runs at a third of the
speed of later ones) are not timed; they are reported. The orders rotate per
run so a noisy machine hurts each alike.

    python -m bench.spark_read [--records 2000000] [--size 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import median, save, stack
from kmq.kafka.backpressure import produce_when_room

PARTITIONS = 4


def fill(bootstrap: str, topic: str, n: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    t0 = time.perf_counter()
    for i in range(n):
        produce_when_room(p, topic, value, b"k%07d" % (i % 1000), partition=i % PARTITIONS)
    assert p.flush(300) == 0
    return n / (time.perf_counter() - t0)


def plain_read(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.queue.backoff.ms": 10, "fetch.wait.max.ms": 50,
                  "max.partition.fetch.bytes": 4 * 1024 * 1024})
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, eof = 0, set()
    while len(eof) < PARTITIONS:
        for m in c.consume(20_000, 0.1):
            if m.error() is not None:
                eof.add(m.partition())
                continue
            m.key(), m.value(), m.offset(), m.timestamp()
            got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got == n, f"plain read {got} of {n}"
    return n / elapsed


def arrow_read(bootstrap: str, topic: str, n: int) -> float:
    from kmq.spark.fetch import read_range
    from kmq.spark.offsets import consumer_config, plan
    from kmq.spark.options import parse
    from kmq.spark.arrow import arrow_schema
    from kmq.spark.source import kafka_schema

    opts = parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    schema = arrow_schema(kafka_schema(False))
    t0 = time.perf_counter()
    got = 0
    for r in plan(opts):
        for batch in read_range(consumer_config(opts), r, schema, include_headers=False,
                                fail_on_data_loss=True, poll_timeout_ms=60_000):
            got += batch.num_rows
    elapsed = time.perf_counter() - t0
    assert got == n, f"arrow read {got} of {n}"
    return n / elapsed


def spark_read(spark, bootstrap: str, topic: str, n: int) -> float:
    from kmq.spark.session import kafka_reader

    df = kafka_reader(spark, bootstrap, subscribe=topic).load()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from kmq.spark.session import local_session

    rows: dict[str, list[float]] = {k: [] for k in ("plain_rows_s", "arrow_rows_s", "spark_rows_s",
                                                    "spark_vs_plain")}
    with stack(tracker=False) as (settings, _, broker):
        bs = broker.bootstrap_servers
        topic = "bench.spark"
        fill_rate = fill(bs, topic, args.records, args.size)
        print(f"filled {args.records:,} x {args.size} B at {fill_rate:,.0f}/s", flush=True)
        t0 = time.perf_counter()
        spark = local_session("local[2]", "kmq-bench")
        session_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        from kmq.spark.session import kafka_reader
        kafka_reader(spark, bs, subscribe=topic, endingOffsets='{"%s": {"0": 10, "1": 10, '
                     '"2": 10, "3": 10}}' % topic).load().count()  # Python workers start
        first_query_s = time.perf_counter() - t0
        warm_rows_s = spark_read(spark, bs, topic, args.records)
        print(f"session {session_s:.1f}s, first query {first_query_s:.1f}s, "
              f"warm-up read {warm_rows_s:,.0f}/s", flush=True)
        order = ["plain", "arrow", "spark"]
        for run in range(args.runs):
            turn = order[run % 3:] + order[:run % 3]
            got = {}
            for which in turn:
                if which == "plain":
                    got[which] = plain_read(bs, topic, args.records)
                elif which == "arrow":
                    got[which] = arrow_read(bs, topic, args.records)
                else:
                    got[which] = spark_read(spark, bs, topic, args.records)
            for which, rate in got.items():
                rows[f"{which}_rows_s"].append(rate)
            rows["spark_vs_plain"].append(got["spark"] / got["plain"])
            print(f"run {run} ({'/'.join(turn)}): plain {got['plain']:,.0f}/s  "
                  f"arrow {got['arrow']:,.0f}/s  spark local[2] {got['spark']:,.0f}/s  "
                  f"spark/plain {got['spark'] / got['plain']:.2f}", flush=True)
        spark.stop()
    result = {k: {"runs": [round(x, 3) for x in v], "median": round(median(v), 3)}
              for k, v in rows.items()}
    print("median: " + "  ".join(f"{k} {v['median']:,.2f}" for k, v in result.items()))
    path = save("spark_read", {
        "command": f"python -m bench.spark_read --records {args.records} --size {args.size} "
                   f"--runs {args.runs}",
        "records": args.records, "size_bytes": args.size, "partitions": PARTITIONS,
        "master": "local[2]", "fill_rows_s": round(fill_rate), "session_start_s": round(session_s, 1),
        "first_query_s": round(first_query_s, 1), "warm_up_spark_rows_s": round(warm_rows_s),
        "results": result})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

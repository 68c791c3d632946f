"""What idle lane readers cost the embedded broker, by how the lanes are laid out in topics.

    python -m bench.broker_lane_topics [--readers 32] [--lanes 256] [--per-topic 16] [--rounds 2]

The embedded broker alone (no tracker, no kmq code): ``--lanes`` lanes as one topic of
that many partitions, and as topics of ``--per-topic`` partitions each
(kmq.protocol.lane_layout). ``--readers`` librdkafka consumers, each assigned one random
lane at its end with a shared consumer's 50 ms fetch wait, wait on empty lanes; the
broker's CPU is sampled over ``--seconds``. Layouts alternate, ``--rounds`` times each.
Why: the embedded broker answers a fetch only once its wait is over (docs/embedded-broker.md), so an
idle shared consumer fetches 20 times a second, and each fetch costs it work in proportion
to the fetched topic's partitions (docs/shared-queues.md, "Lanes in several topics").
"""

from __future__ import annotations

import argparse
import random
import threading
import time

import psutil
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import median, save
from kmq.dev.embedded import EmbeddedBroker
from kmq.protocol.lane_layout import LaneLayout, planned

FETCH_WAIT_MS = 50  # kmq.kafka.profiles.lane_fetch_wait_ms on the embedded broker
SETTLE_S = 3.0  # readers connect and make their first fetches


def create(bootstrap: str, layouts: list[LaneLayout]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    topics = [NewTopic(name, num_partitions=lay.per_topic, replication_factor=1)
              for lay in layouts for name in lay.names()]
    for f in admin.create_topics(topics).values():
        f.result(60)


def idle_cores(bootstrap: str, broker: psutil.Process, layout: LaneLayout, readers: int,
               seconds: float, rng: random.Random) -> float:
    """Broker CPU cores while ``readers`` readers wait on random lanes of ``layout``."""
    consumers = []
    for _ in range(readers):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lane-topics",
                      "enable.auto.commit": False, "fetch.wait.max.ms": FETCH_WAIT_MS})
        lane = rng.randrange(layout.count)
        c.assign([TopicPartition(layout.topic(lane), layout.partition(lane), 0)])
        consumers.append(c)
    stop = threading.Event()

    def pump() -> None:  # serve the clients' queues, as a consumer's receive loop would
        while not stop.is_set():
            for c in consumers:
                c.poll(0)
            stop.wait(0.01)

    t = threading.Thread(target=pump)
    t.start()
    try:
        time.sleep(SETTLE_S)  # the readers' first fetches are not idle
        before = broker.cpu_times()
        time.sleep(seconds)
        after = broker.cpu_times()
    finally:
        stop.set()
        t.join()
        for c in consumers:
            c.close()
    return (after.user + after.system - before.user - before.system) / seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--readers", type=int, default=32)
    ap.add_argument("--lanes", type=int, default=256)
    ap.add_argument("--per-topic", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    layouts = {"one topic": planned("lanes-one", args.lanes, 0),
               "topics of --per-topic": planned("lanes-split", args.lanes, args.per_topic)}
    rng = random.Random(1)
    runs = []
    with EmbeddedBroker() as broker:
        create(broker.bootstrap_servers, list(layouts.values()))
        proc = psutil.Process(broker.process.pid)
        for rnd in range(1, args.rounds + 1):
            for label, layout in layouts.items():
                cores = idle_cores(broker.bootstrap_servers, proc, layout, args.readers, args.seconds, rng)
                runs.append({"round": rnd, "layout": label, "topics": layout.topics,
                             "partitions_per_topic": layout.per_topic, "broker_cores": round(cores, 3)})
                print(runs[-1], flush=True)
    medians = {label: median([r["broker_cores"] for r in runs if r["layout"] == label]) for label in layouts}
    path = save("broker_lane_topics", {
        "command": f"python -m bench.broker_lane_topics --readers {args.readers} --lanes {args.lanes} "
                   f"--per-topic {args.per_topic} --seconds {args.seconds:g} --rounds {args.rounds}",
        "readers": args.readers, "lanes": args.lanes, "fetch_wait_ms": FETCH_WAIT_MS,
        "runs": runs, "median_cores": medians})
    print(f"saved {path}")


if __name__ == "__main__":
    main()

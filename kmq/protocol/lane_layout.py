"""Where a shared consumer's lane lives: lanes spread over deliveries topics of one size.

A shared consumer reads one *lane* (docs/shared-queues.md, step 2). Lane ``l`` is
partition ``l % P`` of deliveries topic ``l // P``, where ``P`` is the partition count of
each deliveries topic; topic 0 is ``KMQ_DELIVERIES_TOPIC`` itself and topic ``i`` is that
name + ``.i``. A CREDIT names the lane by its number, so the consumer and the dispatcher
must map numbers alike: both take the layout from the topics as they exist
(:func:`discover`), never from their own settings.

Why several topics: the embedded broker does work in proportion to the fetched topic's
partition count on every fetch, and an idle shared consumer fetches its lane 20 times a
second there. Measured (32 idle librdkafka readers, one partition each, 50 ms fetch wait):
1.40 and 1.44 broker cores for one topic of 256 partitions, 0.37 and 0.37 for 16 topics of
16. Apache Kafka has no such cost, so the production profile keeps every lane in one topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

MAX_LANE_TOPICS = 4096  # a bound on discovery's walk, far above any sane layout


@dataclass(frozen=True)
class LaneLayout:
    """``topics`` deliveries topics of ``per_topic`` partitions each, named after ``base``."""

    base: str
    per_topic: int
    topics: int

    @property
    def count(self) -> int:
        """How many lanes there are."""
        return self.per_topic * self.topics

    def topic(self, lane: int) -> str:
        return topic_name(self.base, lane // self.per_topic)

    def partition(self, lane: int) -> int:
        return lane % self.per_topic

    def names(self) -> list[str]:
        return [topic_name(self.base, i) for i in range(self.topics)]


def topic_name(base: str, index: int) -> str:
    """Deliveries topic ``index``: the base name itself for the first, ``base.index`` after."""
    return base if index == 0 else f"{base}.{index}"


def planned(base: str, lanes: int, per_topic: int) -> LaneLayout:
    """The layout to create for ``lanes`` lanes, at most ``per_topic`` a topic (0: one topic).

    Lanes are rounded up to a multiple of ``per_topic``: every topic has the same count,
    which is what :func:`discover` reads back.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, got {lanes}")
    if per_topic <= 0 or per_topic >= lanes:
        return LaneLayout(base, lanes, 1)
    return LaneLayout(base, per_topic, -(-lanes // per_topic))


def discover(base: str, partition_counts: Mapping[str, int]) -> LaneLayout | None:
    """The layout the topics form (``partition_counts``: every topic's partitions), or None
    if the first deliveries topic does not exist.

    Topics count while they follow one another by name with the first's partition count: a
    missing or different one ends the layout, so both sides of a CREDIT stop at the same lane.
    """
    per_topic = partition_counts.get(base, 0)
    if per_topic < 1:
        return None
    topics = 1
    while topics < MAX_LANE_TOPICS and partition_counts.get(topic_name(base, topics)) == per_topic:
        topics += 1
    return LaneLayout(base, per_topic, topics)

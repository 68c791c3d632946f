"""An existing topic whose partition count differs from the one kmq would create is refused
(kmq.kafka.admin.ensure_topics) naming the variable that gives the count and a fix that works:
a deliveries topic's count comes from KMQ_DELIVERIES_PARTITIONS or
KMQ_DELIVERIES_TOPIC_PARTITIONS (kmq.protocol.lane_layout)."""

from __future__ import annotations

import re

import pytest

from kmq.errors import ConfigError
from kmq.kafka import admin
from kmq.kafka.admin import partition_count_error
from kmq.settings import Settings


def test_one_deliveries_topic_names_the_lanes_variable_not_the_one_never_set():
    # Found by an audit: it said KMQ_DELIVERIES_TOPIC_PARTITIONS=128 and advised setting it to
    # 256, which failed the same way; KMQ_DELIVERIES_PARTITIONS=256 worked.
    s = Settings.from_env({"KMQ_PROFILE": "production", "KMQ_DELIVERIES_TOPIC": "aud.ct.deliveries",
                           "KMQ_DELIVERIES_PARTITIONS": "128"})
    assert partition_count_error(s, "aud.ct.deliveries", 256, 128) == (
        "topic aud.ct.deliveries has 256 partitions but KMQ_DELIVERIES_PARTITIONS=128 makes it 128 "
        "(every lane in one topic): set KMQ_DELIVERIES_PARTITIONS=256 to use it, or name other topics "
        "with KMQ_DELIVERIES_TOPIC (a topic's partition count is never altered: docs/scaling.md)")


def test_ensure_topics_refuses_with_that_message(monkeypatch):
    s = Settings.from_env({"KMQ_PROFILE": "production", "KMQ_DELIVERIES_PARTITIONS": "128"})
    # the broker's answer (the check comes before any topic is created)
    monkeypatch.setattr(admin, "topic_partition_counts", lambda *_: {s.deliveries_topic: 256})
    with pytest.raises(ConfigError, match="but KMQ_DELIVERIES_PARTITIONS=128 makes it 128 .*: "
                                          "set KMQ_DELIVERIES_PARTITIONS=256 to use it"):
        admin.ensure_topics(s)


def test_the_embedded_default_of_lanes_per_topic_is_named_as_such():
    s = Settings.from_env({"KMQ_PROFILE": "embedded"})
    assert partition_count_error(s, "kmq.deliveries", 8, 16).startswith(
        "topic kmq.deliveries has 8 partitions but KMQ_DELIVERIES_TOPIC_PARTITIONS=0 (the embedded "
        "profile's 16) makes it 16 (of KMQ_DELIVERIES_PARTITIONS=256 lanes): "
        "set KMQ_DELIVERIES_TOPIC_PARTITIONS=8 to use it")


@pytest.mark.parametrize("profile", ["embedded", "production"])
@pytest.mark.parametrize("lanes, per_topic", [(8, 0), (128, 0), (256, 0), (256, 16), (100, 30), (64, 64)])
@pytest.mark.parametrize("have", [1, 8, 16, 32, 200, 256, 1000])
def test_the_advised_setting_gives_the_first_deliveries_topic_its_existing_count(profile, lanes, per_topic, have):
    s = Settings.from_env({"KMQ_PROFILE": profile, "KMQ_DELIVERIES_PARTITIONS": str(lanes),
                           "KMQ_DELIVERIES_TOPIC_PARTITIONS": str(per_topic)})
    if s.lane_layout.per_topic == have:
        return
    advised = dict(re.findall(r"\b(KMQ_DELIVERIES_\w*PARTITIONS)=(\d+)", partition_count_error(
        s, s.deliveries_topic, have, s.lane_layout.per_topic).partition(": set ")[2].partition(" to use it")[0]))
    assert advised, "no fix offered"
    fixed = s.replace(**{k.removeprefix("KMQ_").lower(): int(v) for k, v in advised.items()})
    assert fixed.lane_layout.per_topic == have


def test_a_later_lane_topic_left_from_another_layout_is_ended_before():
    s = Settings.from_env({"KMQ_PROFILE": "embedded"})  # 16 topics of 16
    message = partition_count_error(s, "kmq.deliveries.3", 8, 16)
    assert "set KMQ_DELIVERIES_PARTITIONS=48 to end the lanes before it" in message
    assert s.replace(deliveries_partitions=48).lane_layout.names()[-1] == "kmq.deliveries.2"


def test_other_topics_name_their_own_count():
    s = Settings.from_env({})
    assert partition_count_error(s, s.dlq_topic, 3, s.dlq_partitions).startswith(
        f"topic {s.dlq_topic} has 3 partitions but KMQ_DLQ_PARTITIONS={s.dlq_partitions}: "
        "set KMQ_DLQ_PARTITIONS=3 to use it, or name another topic with KMQ_DLQ_TOPIC")

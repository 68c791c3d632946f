"""Property tests of where lanes live (kmq.protocol.lane_layout).

- What is created is what both sides read back: planned topics, listed, discover to the
  same layout, whatever the lane count and size (adversarial ones included).
- Every lane is one partition of one topic, and no two lanes share one.
- Discovery stops at the first missing or differently sized topic, so a consumer and the
  dispatcher reading the same listing agree on every lane number.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kmq.errors import ConfigError
from kmq.protocol.lane_layout import MAX_LANE_TOPICS, LaneLayout, discover, planned, topic_name
from kmq.settings import Settings

BASE = "kmq.deliveries"


def listing(layout: LaneLayout, **others: int) -> dict[str, int]:
    return {**{name: layout.per_topic for name in layout.names()}, **others}


@settings(max_examples=300, deadline=None)
@given(lanes=st.integers(1, 1 << 20), per_topic=st.integers(0, 1 << 12))
def test_what_is_created_is_what_discovery_reads_back(lanes, per_topic):
    layout = planned(BASE, lanes, per_topic)
    if layout.topics > MAX_LANE_TOPICS:
        return  # refused by the settings (test below)
    assert layout.count >= lanes  # rounded up to whole topics, never fewer
    assert layout.count - lanes < layout.per_topic
    assert per_topic <= 0 or layout.per_topic <= per_topic or layout.topics == 1
    assert discover(BASE, listing(layout, **{"kmq.queue": 8, "other.1": layout.per_topic})) == layout


@settings(max_examples=200, deadline=None)
@given(per_topic=st.integers(1, 64), topics=st.integers(1, 40))
def test_every_lane_is_its_own_partition_of_an_existing_topic(per_topic, topics):
    layout = LaneLayout(BASE, per_topic, topics)
    places = [(layout.topic(lane), layout.partition(lane)) for lane in range(layout.count)]
    assert len(set(places)) == layout.count
    names = set(layout.names())
    assert all(t in names and 0 <= p < per_topic for t, p in places)
    assert layout.topic(0) == BASE and layout.partition(0) == 0


@settings(max_examples=200, deadline=None)
@given(per_topic=st.integers(1, 64), topics=st.integers(2, 30), cut=st.integers(1, 29),
       how=st.sampled_from(["missing", "smaller", "larger"]))
def test_discovery_stops_at_the_first_topic_that_breaks_the_run(per_topic, topics, cut, how):
    cut = min(cut, topics - 1)
    counts = listing(LaneLayout(BASE, per_topic, topics))
    broken = topic_name(BASE, cut)
    if how == "missing":
        del counts[broken]
    else:
        counts[broken] = per_topic + (1 if how == "larger" else -1)
        if counts[broken] == 0:
            del counts[broken]
    assert discover(BASE, counts) == LaneLayout(BASE, per_topic, cut)


def test_no_first_topic_no_layout():
    assert discover(BASE, {}) is None
    assert discover(BASE, {f"{BASE}.1": 16, f"{BASE}.2": 16}) is None
    assert discover(BASE, {BASE: 0}) is None


def test_the_profiles_lay_lanes_out_as_documented():
    embedded = Settings.from_env({}, profile="embedded")
    assert embedded.lane_layout == LaneLayout(BASE, 16, 16)
    assert embedded.lane_layout.names()[:3] == [BASE, f"{BASE}.1", f"{BASE}.2"]
    assert Settings.from_env({}).lane_layout == LaneLayout(BASE, 256, 1)  # production: one topic
    assert Settings.from_env({"KMQ_DELIVERIES_TOPIC_PARTITIONS": "64"}).lane_layout == LaneLayout(BASE, 64, 4)
    assert Settings.from_env({"KMQ_DELIVERIES_PARTITIONS": "40"}, profile="embedded").lane_layout == \
        LaneLayout(BASE, 16, 3)  # rounded up to whole topics


def test_too_many_topics_is_refused_naming_the_setting_to_raise():
    with pytest.raises(ConfigError, match="KMQ_DELIVERIES_TOPIC_PARTITIONS=1 makes 5000 deliveries topics"):
        Settings.from_env({"KMQ_DELIVERIES_PARTITIONS": "5000", "KMQ_DELIVERIES_TOPIC_PARTITIONS": "1"})
    with pytest.raises(ConfigError, match="KMQ_DELIVERIES_TOPIC_PARTITIONS=-1 is negative: give 0 or more"):
        Settings.from_env({"KMQ_DELIVERIES_TOPIC_PARTITIONS": "-1"})

"""Every number among the settings has an upper bound, refused at start naming the variable and
the largest value allowed (a huge one was accepted and broke later: an OverflowError when the
tracker started, a topic librdkafka would not create, a depth scan that stood still)."""

from __future__ import annotations

import dataclasses
import gc
import re
import threading

import pytest

from kmq.errors import ConfigError
from kmq.kafka.profiles import group_timeouts
from kmq.setting_bounds import (C_INT_MAX, I64_MAX, MAX_REPLICATION_FACTOR, MAX_THREAD_WAIT_MS,
                                MAX_TOPIC_PARTITIONS, UPPER_BOUNDS)
from kmq.setting_values import _kind
from kmq.settings import Settings

NUMBERS = [f for f in dataclasses.fields(Settings) if _kind(f) in (int, float)]
HUGE = "99999999999999999999"  # 10**20 - 1: above every C and Java integer


@pytest.mark.parametrize("f", NUMBERS, ids=lambda f: f.metadata["env"])
def test_a_huge_value_of_any_number_is_refused_naming_its_variable(f):
    env = f.metadata["env"]
    with pytest.raises(ConfigError, match=rf"^{env}=(1e\+20|{HUGE}) "):  # names it first
        Settings.from_env({env: HUGE})


@pytest.mark.parametrize("name", sorted(UPPER_BOUNDS))
def test_each_bound_is_allowed_and_one_more_is_refused_with_the_largest_value(name):
    limit, _ = UPPER_BOUNDS[name]
    assert getattr(Settings(**{name: limit}), name) == limit
    env = Settings.__dataclass_fields__[name].metadata["env"]
    with pytest.raises(ConfigError, match=rf"^{env}={limit + 1} is above {limit:,}, .*: give at most {limit:,}$"):
        Settings(**{name: limit + 1})


@pytest.mark.parametrize("name", sorted(UPPER_BOUNDS))
def test_the_configuration_reference_states_each_bound(name):
    limit, _ = UPPER_BOUNDS[name]
    doc = Settings.__dataclass_fields__[name].metadata["doc"]
    assert (f"at most {limit:,}" in doc) or (limit == I64_MAX and "at most 2**63-1" in doc), doc


def test_the_bounds_are_where_python_and_librdkafka_break():
    # gc.set_threshold takes a C int (KMQ_TRACKER_GC_THRESHOLD).
    saved = gc.get_threshold()
    try:
        gc.set_threshold(C_INT_MAX, *saved[1:])
        with pytest.raises(OverflowError):
            gc.set_threshold(C_INT_MAX + 1, *saved[1:])
    finally:
        gc.set_threshold(*saved)
    # The depth scan waits on a threading.Event (KMQ_STATS_REFRESH_MS).
    assert MAX_THREAD_WAIT_MS / 1000 <= threading.TIMEOUT_MAX
    # librdkafka's CreateTopics ranges (partition counts, KMQ_REPLICATION_FACTOR).
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    for partitions, replicas in ((MAX_TOPIC_PARTITIONS + 1, 1), (1, MAX_REPLICATION_FACTOR + 1)):
        with pytest.raises(ValueError, match="out of expected range"):
            admin.create_topics([NewTopic("kmq.bounds", partitions, replicas)], request_timeout=1)


def test_all_lanes_in_one_deliveries_topic_are_bounded_by_a_topics_partitions():
    with pytest.raises(ConfigError, match=r"^KMQ_DELIVERIES_PARTITIONS=100001 makes a deliveries topic of "
                                          r"100,001 partitions.*KMQ_DELIVERIES_TOPIC_PARTITIONS"):
        Settings.from_env({"KMQ_DELIVERIES_PARTITIONS": "100001"})
    spread = Settings.from_env({"KMQ_DELIVERIES_PARTITIONS": "100001", "KMQ_DELIVERIES_TOPIC_PARTITIONS": "1000"})
    assert spread.lane_layout.per_topic == 1000 and spread.lane_layout.topics == 101


@pytest.mark.parametrize("profile, session_ms", [("production", 0), ("embedded", 0), ("production", 120_000)])
def test_the_tracker_fetch_wait_stays_below_its_request_timeout(profile, session_ms):
    s = Settings(profile=profile, session_timeout_ms=session_ms)
    most = group_timeouts(s).request_ms - 1000  # aiokafka gives up on a fetch after request_ms
    assert s.replace(tracker_fetch_wait_ms=most).tracker_fetch_wait_ms == most
    with pytest.raises(ConfigError, match=rf"^KMQ_TRACKER_FETCH_WAIT_MS={most + 1} .* request timeout of "
                                          rf"{most + 1000:,} ms .*give at most {most:,} \(given as the keyword "
                                          r"tracker_fetch_wait_ms of Settings / kmq.Client\)$"):
        s.replace(tracker_fetch_wait_ms=most + 1)


FLOATS = [f for f in NUMBERS if _kind(f) is float]


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "Infinity"])
@pytest.mark.parametrize("f", FLOATS, ids=lambda f: f.metadata["env"])
def test_nan_and_infinity_are_refused_naming_the_variable(f, raw):
    env = f.metadata["env"]
    with pytest.raises(ConfigError, match=rf"^{env}='{raw}' is not a finite number"):
        Settings.from_env({env: raw})
    with pytest.raises(ConfigError, match=rf"^{f.name}=\S+ \({env}\) is not a finite number"):
        Settings(**{f.name: float(raw)})


@pytest.mark.parametrize("host", ["   ", "\t", ""])
def test_a_blank_web_host_is_refused_naming_it(host):
    with pytest.raises(ConfigError, match=rf"^KMQ_WEB_HOST={re.escape(repr(host))} is blank: give the address"):
        Settings(web_host=host)
    if host:  # (an empty variable counts as unset: the default)
        with pytest.raises(ConfigError, match="KMQ_WEB_HOST"):
            Settings.from_env({"KMQ_WEB_HOST": host})


@pytest.mark.parametrize("env, host", [
    *((env, host) for env in ("KMQ_WEB_HOST", "KMQ_WEB_ADVERTISED_HOST")
      for host in (" 127.0.0.1", "tracker-1 ", "tracker 1")),
    ("KMQ_WEB_ADVERTISED_HOST", "   "),  # (a blank KMQ_WEB_HOST: the test above)
])
def test_a_web_host_with_whitespace_is_refused_naming_it(env, host):
    with pytest.raises(ConfigError, match=rf"^{env}='{host}' contains whitespace: give one host name"):
        Settings.from_env({env: host})


def test_an_empty_advertised_host_still_means_the_web_host():
    assert Settings(web_advertised_host="").web_advertised_host == ""
    assert Settings.from_env({"KMQ_WEB_HOST": "tracker-1", "KMQ_WEB_ADVERTISED_HOST": "t1.example"}).web_host == "tracker-1"

"""How long user code may hold a message: the queue's max_processing_s, else KMQ_MAX_PROCESSING_S
(5 min, KIP-62's max.poll.interval.ms), never below the visibility timeout."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmq.errors import ConfigError
from kmq.queue_config import QueueConfig
from kmq.settings import DEFAULT_MAX_PROCESSING_S, Settings


def test_the_default_is_five_minutes_and_read_from_the_environment():
    assert Settings().max_processing_s == DEFAULT_MAX_PROCESSING_S == 300.0
    assert Settings.from_env({"KMQ_MAX_PROCESSING_S": "42.5"}).max_processing_s == 42.5
    assert Settings.from_env({"KMQ_MAX_PROCESSING_S": "0"}).max_processing_s == 0.0  # no keepalive


@pytest.mark.parametrize("raw", ["-1", "soon", str(8 * 24 * 3600)])
def test_a_bad_default_names_the_variable(raw):
    with pytest.raises(ConfigError, match="KMQ_MAX_PROCESSING_S"):
        Settings.from_env({"KMQ_MAX_PROCESSING_S": raw})


def test_an_unconfigured_queue_keeps_a_slow_handler_alive_for_five_minutes():
    assert QueueConfig().processing_s(Settings(visibility_timeout_s=30.0)) == 300.0


seconds = st.floats(min_value=0.001, max_value=7 * 24 * 3600.0, allow_nan=False)


@given(vis=seconds, queue_max=st.none() | seconds, default=st.just(0.0) | seconds)
def test_processing_time_is_the_queues_else_the_default_never_below_the_visibility(vis, queue_max, default):
    settings = Settings(visibility_timeout_s=min(vis, 12 * 3600.0), max_processing_s=default)
    got = QueueConfig(max_processing_s=queue_max).processing_s(settings)
    wanted = default if queue_max is None else queue_max
    assert got == max(settings.visibility_timeout_s, wanted)
    assert got >= settings.visibility_timeout_s

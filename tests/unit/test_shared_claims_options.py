"""``client.consumer(queue, ...)``'s numbers as docs/shared-queues.md uses them: a
``max_in_flight`` (the credit a shared consumer asks for) and a ``batch_size`` must be whole
numbers, and a wrong one is a ConfigError naming the option, before any broker is asked."""

from __future__ import annotations

import pytest

from kmq.consumer.facade import Consumer
from kmq.errors import ConfigError
from kmq.settings import Settings

# No broker listens here: validation must fail before anything connects.
SETTINGS = Settings.from_env({}, bootstrap_servers="127.0.0.1:9", profile="embedded")


def make(**options) -> Consumer:
    return Consumer(SETTINGS, "orders", queue_topic_partitions=1, markers_topic_partitions=1, **options)


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", None, True, False])
def test_a_max_in_flight_that_is_not_a_whole_number_from_1_is_refused_by_name(value):
    with pytest.raises(ConfigError, match=r"max_in_flight=.* must be a whole number >= 1"):
        make(max_in_flight=value)


@pytest.mark.parametrize("value", [0, 32769, 2.0, True])
def test_a_batch_size_that_is_not_a_whole_number_in_range_is_refused_by_name(value):
    with pytest.raises(ConfigError, match=r"batch_size=.* must be a whole number from 1 to 32768"):
        make(batch_size=value)


@pytest.mark.parametrize("value", [0, 11, True])
def test_a_prefetch_beyond_max_in_flight_is_refused_by_name(value):
    with pytest.raises(ConfigError, match=r"prefetch=.* must be a whole number from 1 to max_in_flight=10"):
        make(max_in_flight=10, prefetch=value)

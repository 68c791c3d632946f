"""``client.consumer(visibility_timeout_s=..., max_processing_s=...)`` take at least a
millisecond, as ``KMQ_VISIBILITY_TIMEOUT_S`` and a queue's own settings do: markers carry
whole milliseconds, and 0.0001 s was accepted and sent as a timeout of 0 ms."""

from __future__ import annotations

import pytest

import kmq
from kmq.consumer.arguments import check_arguments


@pytest.mark.parametrize("name", ["visibility_timeout_s", "max_processing_s"])
def test_a_timeout_below_a_millisecond_is_refused_naming_it(name):
    args = dict(visibility_timeout_s=None, max_processing_s=None, max_in_flight=10, batch_size=10,
                prefetch=None, flush_interval_s=0.1)
    with pytest.raises(kmq.ConfigError, match=rf"{name}=0.0001 must be a number of seconds from 0.001 to"):
        check_arguments(**{**args, name: 0.0001})
    check_arguments(**{**args, name: 0.001})  # the floor itself is fine

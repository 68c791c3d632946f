"""A queue's settings record read back: the seconds come back as floats however they were
given (an audit: the detail view said 600 for one queue and 30.0 for the others)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kmq.queue_config import SECONDS_FIELDS, QueueConfig


@pytest.mark.parametrize("field", SECONDS_FIELDS)
def test_whole_seconds_read_back_as_floats(field):
    got = QueueConfig.decode(replace(QueueConfig(), **{field: 600}).encode())
    assert getattr(got, field) == 600.0 and type(getattr(got, field)) is float


def test_unset_seconds_stay_unset_and_other_fields_keep_their_types():
    got = QueueConfig.decode(replace(QueueConfig(), max_deliveries=3, spread=2).encode())
    assert got.visibility_timeout_s is None and got.max_processing_s is None
    assert type(got.max_deliveries) is int and type(got.spread) is int

"""What a send may carry: every bad argument is refused with its name and the fix."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from kmq.errors import ConfigError
from kmq.protocol import envelope
from kmq.protocol.ordering import MAX_DEDUP_ID_BYTES, MAX_GROUP_BYTES
from kmq.send_args import check_headers, check_value, finite_s, order_headers


@pytest.mark.parametrize("bad, says", [
    ("text", "encode it first"), (None, "value must be bytes"), (12, "value must be bytes")])
def test_a_value_must_be_bytes(bad, says):
    with pytest.raises(ConfigError, match=says):
        check_value(bad)


def test_bytes_like_values_are_taken_as_bytes():
    assert check_value(bytearray(b"ab")) == b"ab" and check_value(memoryview(b"cd")) == b"cd"


@pytest.mark.parametrize("bad, says", [
    ({"kmq.id": b"x"}, "kmq's own; rename it"), ({"": b"x"}, "non-empty string"),
    ({"h": 3}, "must be bytes or str"), ([("h", b"x")], "must be a dict")])
def test_headers_name_what_is_wrong(bad, says):
    with pytest.raises(ConfigError, match=says):
        check_headers(bad)


@pytest.mark.parametrize("value", [True, math.inf, math.nan, "5", None])
def test_delays_are_finite_seconds(value):
    with pytest.raises(ConfigError, match="delay_s=.* finite number of seconds"):
        finite_s("delay_s", value)


@given(st.binary(min_size=0, max_size=MAX_GROUP_BYTES + 2), st.binary(min_size=0, max_size=MAX_DEDUP_ID_BYTES + 2))
def test_group_and_dedup_ids_within_their_limits_become_headers(group, dedup_id):
    ok = 1 <= len(group) <= MAX_GROUP_BYTES and 1 <= len(dedup_id) <= MAX_DEDUP_ID_BYTES
    if ok:
        assert order_headers(group, dedup_id) == [(envelope.GROUP, group), (envelope.DEDUP_ID, dedup_id)]
    else:
        with pytest.raises(ConfigError, match="(group|dedup_id)=.* bytes"):
            order_headers(group, dedup_id)


def test_a_send_without_group_or_dedup_id_carries_no_order_headers():
    assert order_headers(None, None) == []

"""Placement: the Java client's murmur2, and queue id rules."""

import pytest

from kmq.errors import InvalidQueueNameError
from kmq.protocol.placement import markers_partition, murmur2, queue_partitions, validate_queue_name


@pytest.mark.parametrize("key, expected", [
    # Vectors of Kafka's own Utils.murmur2 tests.
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), (b"abc", 479470107),
])
def test_murmur2_matches_kafka(key, expected):
    assert murmur2(key) == expected


def test_a_queue_spreads_over_consecutive_partitions():
    first = queue_partitions("orders", 16)[0]
    assert queue_partitions("orders", 16, spread=3) == tuple((first + i) % 16 for i in range(3))
    assert sorted(queue_partitions("orders", 4, spread=9)) == [0, 1, 2, 3]  # capped at the count
    assert 0 <= markers_partition("orders", 8) < 8


# "a\n" passed while the rule ended in $ (which also matches before a final newline).
@pytest.mark.parametrize("name", ["", "-x", "a b", "ä", "x" * 129, None, 5, "a/b", "a\n", "orders\n", "\n"])
def test_invalid_queue_names_are_refused_with_the_rule(name):
    with pytest.raises(InvalidQueueNameError, match="1-128 characters"):
        validate_queue_name(name)


@pytest.mark.parametrize("name", ["orders", "a", "tenant-1.orders_v2~x", "9" * 128])
def test_valid_queue_names_pass(name):
    assert validate_queue_name(name) == name


@pytest.mark.parametrize("name", ["t\n", "t\r\n", " t", ""])
def test_a_tenant_name_with_a_final_newline_is_refused(name):
    from kmq.errors import ConfigError
    from kmq.ops.tenancy import validate_tenant_name
    with pytest.raises(ConfigError, match="not a valid tenant name"):
        validate_tenant_name(name)


def test_a_marker_naming_a_queue_with_a_final_newline_is_refused_by_the_codec():
    from kmq.errors import MarkerDecodeError
    from kmq.protocol import marker_codec
    from kmq.protocol.markers import Purge
    with pytest.raises(ValueError, match="not a valid queue id"):
        marker_codec.encode([Purge("orders\n")])
    forged = marker_codec.encode([Purge("ordersX")]).replace(b"ordersX", b"orders\n")  # another client's
    with pytest.raises(MarkerDecodeError, match="not a valid queue id"):
        marker_codec.decode(forged)

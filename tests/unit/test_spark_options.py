"""The Spark source's options and offset planning, without Spark or Kafka."""

import pytest

from kmq.errors import ConfigError
from kmq.spark.offsets import DataLossError, OffsetRange, resolve, split
from kmq.spark.options import parse

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_options_are_read_whatever_their_case():
    # Spark hands options over lower-cased; users write them camelCase.
    for opts in ({**BASE, "subscribe": "a, b", "startingOffsets": '{"a": {"0": 5, "1": -2}}',
                  "minPartitions": "4", "includeHeaders": "true", "failOnDataLoss": "false"},
                 {**{k.lower(): v for k, v in BASE.items()}, "subscribe": "a, b",
                  "startingoffsets": '{"a": {"0": 5, "1": -2}}', "minpartitions": "4",
                  "includeheaders": "true", "failondataloss": "false"}):
        o = parse(opts)
        assert o.subscribe == ("a", "b")
        assert o.starting == {("a", 0): 5, ("a", 1): -2}
        assert o.ending == "latest"
        assert (o.min_partitions, o.include_headers, o.fail_on_data_loss) == (4, True, False)


def test_kafka_options_pass_through_without_their_prefix():
    o = parse({**BASE, "assign": '{"t": [1, 0, 1]}', "kafka.security.protocol": "SSL",
               "kafka.fetch.max.bytes": "1000"})
    assert o.kafka == {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SSL",
                       "fetch.max.bytes": "1000"}
    assert o.assign == {"t": (0, 1)}
    assert o.topic_matches("t") and not o.topic_matches("u")


def test_subscribe_pattern_matches_whole_topic_names():
    o = parse({**BASE, "subscribePattern": r"kmq\..*"})
    assert o.topic_matches("kmq.dlq") and not o.topic_matches("x.kmq.dlq")


@pytest.mark.parametrize("opts, words", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({**BASE}, "exactly one of"),
    ({**BASE, "subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
    ({**BASE, "subscribe": "t", "startingOffsets": "latest"}, "not allowed in a batch"),
    ({**BASE, "subscribe": "t", "endingOffsets": "earliest"}, "not allowed in a batch"),
    ({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "latest (-1)"),
    ({**BASE, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "earliest (-2)"),
    ({**BASE, "subscribe": "t", "startingOffsets": "{nope"}, "startingOffsets"),
    ({**BASE, "subscribe": "t", "minPartitions": "0"}, "minPartitions"),
    ({**BASE, "subscribe": "t", "includeHeaders": "yes"}, "includeHeaders"),
    ({**BASE, "subscribe": "t", "kafka.auto.offset.reset": "latest"}, "startingOffsets"),
    ({**BASE, "subscribe": "t", "startingTimestamp": "1"}, "not supported"),
    ({**BASE, "assign": "[1]"}, "assign"),
])
def test_bad_options_are_refused_with_a_message_naming_them(opts, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse(opts)


def test_offsets_resolve_against_the_log_and_sentinels():
    o = parse({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": 3, "1": -2}}',
               "endingOffsets": '{"t": {"0": -1, "1": 7}}'})
    assert resolve(o, ("t", 0), 0, 10) == OffsetRange("t", 0, 3, 10)
    assert resolve(o, ("t", 1), 2, 10) == OffsetRange("t", 1, 2, 7)
    with pytest.raises(ConfigError, match="no offset for t/2"):
        resolve(o, ("t", 2), 0, 10)


@pytest.mark.parametrize("option, offered, refused", [("startingOffsets", "-2 earliest", "-1"),
                                                      ("endingOffsets", "-1 latest", "-2")])
def test_a_partition_left_out_is_told_the_special_offset_that_option_takes(option, offered, refused):
    # An audit: both options offered "-2 earliest, -1 latest", and following the advice with
    # the other one was refused (latest is no start of a batch read, earliest no end).
    o = parse({**BASE, "subscribe": "t", option: '{"t": {"0": 3}}'})
    with pytest.raises(ConfigError) as caught:
        resolve(o, ("t", 1), 0, 10)
    said = str(caught.value)
    assert f"option {option} has no offset for t/1" in said and offered in said and f"{refused} " not in said


def test_offsets_gone_or_not_yet_written_fail_unless_data_loss_is_allowed():
    strict = parse({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": 1}}',
                    "endingOffsets": '{"t": {"0": 50}}'})
    with pytest.raises(DataLossError, match="below the earliest offset 5"):
        resolve(strict, ("t", 0), 5, 100)
    with pytest.raises(DataLossError, match="past the end 20"):
        resolve(strict, ("t", 0), 0, 20)
    lenient = parse({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": 1}}',
                     "endingOffsets": '{"t": {"0": 50}}', "failOnDataLoss": "false"})
    assert resolve(lenient, ("t", 0), 5, 20) == OffsetRange("t", 0, 5, 20)


def test_split_gives_at_least_min_partitions_contiguous_pieces_biggest_first():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 5, 5)]
    pieces = split(ranges, min_partitions=6)
    assert len(pieces) == 6
    assert all(p.size > 0 for p in pieces)
    by_part = {}
    for p in pieces:
        by_part.setdefault(p.partition, []).append(p)
    assert len(by_part[0]) == 5 and len(by_part[1]) == 1  # the big partition is split
    for part, ps in by_part.items():
        assert ps[0].start == ranges[part].start and ps[-1].end == ranges[part].end
        assert all(a.end == b.start for a, b in zip(ps, ps[1:]))


def test_split_caps_records_per_piece_and_stops_at_single_offsets():
    assert [p.size for p in split([OffsetRange("t", 0, 0, 10)], max_records=4)] == [3, 3, 4]
    assert len(split([OffsetRange("t", 0, 0, 3)], min_partitions=10)) == 3
    assert split([OffsetRange("t", 0, 4, 4)], min_partitions=2) == []

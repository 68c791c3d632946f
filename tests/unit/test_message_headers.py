"""A received message's kmq headers come from any producer: odd values never break reading it."""

from kmq.consumer.held import HeldRange
from kmq.consumer.settlement import SettlementLog
from kmq.protocol.markers import RangeRef
from kmq.message import Message


class Record:
    """The few confluent_kafka.Message accessors Message reads."""

    def __init__(self, headers, value=b"v"):
        self._headers = headers
        self._value = value

    def value(self):
        return self._value

    def headers(self):
        return self._headers

    def partition(self):
        return 3

    def offset(self):
        return 17

    def timestamp(self):
        return (1, 1234)


def message(headers, value=b"v") -> Message:
    held = HeldRange(RangeRef("q", 3, 17, 18), None, SettlementLog())
    return Message((Record(headers, value), held, 0))


def test_an_id_header_that_is_not_utf8_still_gives_an_id():
    m = message([("kmq.id", b"\xff\xfeabc")])
    assert m.id == "\ufffd\ufffdabc"


def test_unparsable_counts_and_times_fall_back_to_defaults():
    m = message([("kmq.deliveries", b"zz"), ("kmq.enqueued-ms", b"-x"), ("kmq.id", None), ("u", None)])
    assert m.delivery_count == 1 and m.enqueued_at_ms == 1234
    assert m.id == "3:17" and m.headers == {"u": b""}


def test_a_null_record_value_is_an_empty_payload_like_its_redeliveries():
    assert message([], value=None).value == b""


def test_a_group_the_dispatcher_does_not_take_is_no_group_to_the_consumer():
    # The dispatcher counts an empty or over-128-byte kmq.group as bad-group and hands the
    # record out as a group of its own; the consumer's gate held such records for each other.
    assert message([("kmq.group", b"g" * 129)]).group is None
    assert message([("kmq.group", b"")]).group is None
    assert message([("kmq.group", b"g" * 128)]).group == "g" * 128

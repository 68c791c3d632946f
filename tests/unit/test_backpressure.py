"""produce_when_room: a full local queue means wait on deliveries, never a lost or failed send."""

import pytest

from kmq.kafka.backpressure import produce_when_room


class FullThenRoom:
    """A producer whose local queue is full for the first ``full`` attempts."""

    def __init__(self, full: int, error: Exception | None = None) -> None:
        self.full, self.error = full, error
        self.polls, self.produced = [], []

    def produce(self, topic, value, key=None, **kwargs):
        if self.error is not None:
            raise self.error
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        self.produced.append((topic, value, key, kwargs))

    def poll(self, timeout_s):
        self.polls.append(timeout_s)


def test_a_full_queue_is_waited_out_and_the_record_written_once():
    p = FullThenRoom(full=3)
    produce_when_room(p, "t", b"v", b"k", partition=2, headers=[("h", b"1")])
    assert p.produced == [("t", b"v", b"k", {"partition": 2, "headers": [("h", b"1")]})]
    assert len(p.polls) == 3 and all(0 < s <= 0.1 for s in p.polls)


def test_other_errors_reach_the_caller():
    p = FullThenRoom(full=0, error=ValueError("too large"))
    with pytest.raises(ValueError, match="too large"):
        produce_when_room(p, "t", b"v")
    assert p.polls == []

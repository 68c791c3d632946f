"""A shared consumer's lanes during a move (kmq.consumer.lanes), with lane readers faked:
both lanes are read until the old one's FAREWELL, so no delivery waits for it."""

from __future__ import annotations

import threading

from kmq.consumer import lanes as L
from kmq.consumer.lane_reader import Got
from kmq.kafka.batch_skips import BatchSkips
from kmq.protocol import deliveries as D
from kmq.protocol import markers as M
from kmq.protocol.lane_layout import LaneLayout


class FakeLane:
    def __init__(self, lane: int) -> None:
        self.lane = lane
        self.queued: list = []
        self.polled: list[float] = []
        self.own_bytes = self.other_bytes = self.malformed = 0
        self.skips = BatchSkips(f"lane {lane}")
        self.fatal = None
        self.closed = False

    def read(self, timeout_s: float) -> list:
        self.polled.append(timeout_s)
        out, self.queued = self.queued, []
        return out

    def assembling(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def delivery(seq: int) -> Got:
    r = M.RangeRef("jobs", 0, seq * 10, seq * 10 + 1)
    return Got(D.Delivery(D.COPY, 1, seq, 30_000, r, 1), ["record"])


def moving() -> tuple[L.ConsumerLanes, dict[int, FakeLane]]:
    opened: dict[int, FakeLane] = {}

    def open_lane(lane: int) -> FakeLane:
        opened[lane] = FakeLane(lane)
        return opened[lane]

    lanes = L.ConsumerLanes(open_lane, LaneLayout("kmq.deliveries", 16, 1), "jobs", threading.Lock())
    first = lanes.current
    lanes._move(first, (first.lane + 1) % 16)
    return lanes, opened


def test_a_delivery_on_the_new_lane_is_not_held_back_while_no_farewell_came():
    lanes, opened = moving()
    old, new = lanes.leaving, lanes.current
    new.queued = [delivery(7)]  # the dispatcher knew the consumer only by its new lane: no FAREWELL
    got, fatal = lanes.read(5.0, may_move=True)
    assert [g.delivery.seq for g in got] == [7] and fatal is None
    assert old.polled == [0.0] and new.polled[-1] <= L.MOVE_POLL_S  # neither waits long
    assert lanes.leaving is old and not old.closed


def test_the_old_lane_is_read_until_its_farewell_then_closed():
    lanes, _ = moving()
    old, new = lanes.leaving, lanes.current
    old.queued = [delivery(5), D.Farewell(1, 5)]
    new.queued = [delivery(6)]
    got, _ = lanes.read(1.0, may_move=True)
    assert [g.delivery.seq for g in got] == [5, 6]  # the old lane's first
    assert lanes.leaving is None and old.closed and lanes.settled()
    lanes.read(0.0, may_move=True)
    assert old.polled == [0.0]  # never read again


def test_without_a_farewell_the_old_lane_is_given_up_after_the_wait():
    lanes, _ = moving()
    old = lanes.leaving
    lanes._left_at_s -= L.MOVE_WAIT_S
    lanes.read(0.0, may_move=True)
    assert lanes.leaving is None and old.closed


def test_a_farewell_on_the_lane_asked_on_answers_a_goodbye():
    lanes, _ = moving()
    lanes.current.queued = [D.Farewell(1, 9)]
    got, _ = lanes.read(0.0, may_move=False)
    assert got == [D.Farewell(1, 9)] and lanes.leaving is not None


def test_batches_skipped_are_counted_on_every_lane_read_the_ones_left_too():
    lanes, _ = moving()
    old, new = lanes.leaving, lanes.current
    old.skips.batches, new.skips.batches = 2, 1
    assert lanes.skipped_batches() == 3
    old.queued = [D.Farewell(1, 0)]
    lanes.read(0.0, may_move=True)
    assert lanes.leaving is None and lanes.skipped_batches() == 3  # the lane left still counts

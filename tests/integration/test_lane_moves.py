"""A shared consumer leaves a lane that other consumers' copies fill (kmq.consumer.lane_choice),
on the embedded broker with a real tracker: it reads the old lane until the dispatcher's
FAREWELL there, then gets its deliveries on the new one; nothing is lost or doubled."""

from __future__ import annotations

from collections import Counter

import pytest

import kmq
from kmq.consumer import lanes
from kmq.consumer.lane_choice import MIN_OTHER_BYTES
from tests.conftest import wait_for
from tests.integration.views import dispatcher_stats, tracker_sees

LANE = 5  # both consumers start here


@pytest.fixture
def client(shared_settings, tracker):
    with kmq.Client(settings=shared_settings) as c:
        yield c



def test_a_consumer_whose_lane_others_fill_moves_and_nothing_is_lost(client, queue, tracker, monkeypatch):
    busy, idle = f"{queue}-busy", f"{queue}-idle"
    # An ordered queue's deliveries are always copies: they cross the lane.
    client.configure_queue(busy, dispatch="shared", ordering="group")
    client.configure_queue(idle, dispatch="shared")
    tracker_sees(tracker, busy, dispatch="shared", ordering="group")
    tracker_sees(tracker, idle, dispatch="shared")
    real_pick = lanes.pick_lane
    monkeypatch.setattr(lanes, "pick_lane",
                        lambda count, avoid=(): LANE if not avoid else real_pick(count, avoid))
    moves_before = dispatcher_stats(tracker)["lane-moves"]
    got: list[str] = []
    with client.consumer(busy, max_in_flight=500) as a, client.consumer(idle, max_in_flight=10) as b:
        assert a._source.lane == b._source.lane == LANE
        ids = [client.send(busy, b"x" * 1024, group=f"g{i % 60}") for i in range(240)]
        client.flush()

        def both_done() -> bool:
            batch = a.receive_batch(100, timeout_s=0.05)
            got.extend(m.id for m in batch)
            batch.ack()
            assert b.receive(timeout_s=0.05) is None  # nothing was sent to it yet
            return len(got) >= len(ids) and b._source.lane_moves == 1 and b._source.lanes.leaving is None

        wait_for(both_done, 90, what="the busy queue drained and the idle consumer moved")
        assert a._source.lane_moves == 0  # its lane is its own
        assert b._source.lane != LANE
        own, others = b._source.lane_bytes()
        assert others >= MIN_OTHER_BYTES and own < 1024  # what it read before it moved

        after = client.send(idle, b"after the move")
        client.flush()
        m = []
        wait_for(lambda: m.append(b.receive(timeout_s=0.2)) or m[-1] is not None, 30,
                 what="a delivery on the new lane")
        assert m[-1].id == after
        m[-1].ack()
    assert Counter(got) == Counter(ids), "lost or doubled"
    # The move was answered (a FAREWELL on the old lane), not waited out.
    assert dispatcher_stats(tracker)["lane-moves"] == moves_before + 1

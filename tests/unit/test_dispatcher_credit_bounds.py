"""A dispatcher keeps a bounded number of shared-queue consumers (kmq.protocol.dispatch.admits).

Anyone may write a CREDIT naming any consumer id and any queue. Before the bound, every
made-up id was kept for its lease (up to 12 h): 200,000 of them, 49 records of markers, held
188 MiB, and 200,000 made-up queues made each dispatch round's lease expiry 0.74 s
(bench.hostile_credits). Beyond the bound a new
consumer's CREDIT is counted (``credits-refused``) and set aside; consumers already kept go
on renewing, and a refused one gets in with a later CREDIT once another left.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from agents.dispatch.dispatcher import Dispatcher
from agents.dispatch.epochs import OwnedPartition
from kmq.protocol import markers as M
from kmq.protocol.dispatch import admits
from kmq.protocol.limits import MAX_CONSUMERS_PER_PARTITION, MAX_CONSUMERS_PER_QUEUE, MAX_TIMEOUT_MS
from kmq.settings import Settings


@pytest.fixture
def dispatcher():
    d = Dispatcher(Settings(), configs=lambda: None)
    # no broker: lanes are stand-ins (a known layout, farewells not written)
    d._lanes = SimpleNamespace(layout=SimpleNamespace(count=256), farewell=lambda *a: None)
    d._parts[0] = OwnedPartition(7, ready=True)
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.ERROR)
    yield d
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.NOTSET)


def credit(queue: str, consumer: str, lease_ms: int = MAX_TIMEOUT_MS, free: int = 5) -> M.Credit:
    return M.Credit(queue, consumer, 1, 0, 0, free, lease_ms, 30_000)


def kept(d: Dispatcher) -> int:
    return sum(len(r.slots) for r in d._parts[0].rosters.values())


def test_admits_is_the_two_bounds():
    assert admits(0, 0)
    assert admits(MAX_CONSUMERS_PER_QUEUE - 1, MAX_CONSUMERS_PER_PARTITION - 1)
    assert not admits(MAX_CONSUMERS_PER_QUEUE, 0)
    assert not admits(0, MAX_CONSUMERS_PER_PARTITION)


def test_made_up_consumer_ids_of_one_queue_stop_at_its_bound_and_known_ones_renew(dispatcher):
    d = dispatcher
    extra = 1000
    for i in range(MAX_CONSUMERS_PER_QUEUE + extra):
        d._credit(0, credit("jobs", f"made-up-{i}"))
    assert len(d._parts[0].rosters["jobs"].slots) == MAX_CONSUMERS_PER_QUEUE
    assert d.stats["credits-refused"] == extra
    d._credit(0, credit("jobs", "made-up-0", free=9))  # one kept renews at the bound
    assert d._parts[0].rosters["jobs"].slots["made-up-0"].available == 9
    assert d.stats["credits-refused"] == extra
    d._credit(0, credit("jobs", "made-up-1", lease_ms=0))  # one leaves: a refused one gets in
    d._credit(0, credit("jobs", "late-comer"))
    assert "late-comer" in d._parts[0].rosters["jobs"].slots
    d._credit(0, credit("jobs", "later-comer"))
    assert "later-comer" not in d._parts[0].rosters["jobs"].slots


def test_made_up_queues_stop_at_the_markers_partitions_bound(dispatcher):
    d = dispatcher
    extra = 500
    for i in range(MAX_CONSUMERS_PER_PARTITION + extra):
        d._credit(0, credit(f"q{i}", "c"))
    assert kept(d) == MAX_CONSUMERS_PER_PARTITION == len(d._parts[0].rosters)
    assert d.stats["credits-refused"] == extra
    assert f"q{MAX_CONSUMERS_PER_PARTITION}" not in d._parts[0].rosters  # no empty roster left behind
    d._credit(0, credit("q0", "c", lease_ms=0))  # one leaves; the next round counts it gone
    d._credit(0, credit("late", "c"))
    assert "late" not in d._parts[0].rosters
    d._expire_consumers(now_ms=0)
    d._credit(0, credit("late", "c"))
    assert "late" in d._parts[0].rosters and kept(d) == MAX_CONSUMERS_PER_PARTITION


def test_a_queue_whose_consumers_all_lapsed_is_dropped_as_if_they_had_said_goodbye(dispatcher):
    # Before (an audit): SIGKILLed consumers left an empty roster for good, which kept the
    # queue's records read ahead while other queues of its partition were read.
    d = dispatcher
    d._credit(0, credit("jobs", "a", lease_ms=1000))
    d._credit(0, credit("other", "b", lease_ms=30_000))
    now_ms = d._parts[0].rosters["jobs"].now_ms
    d._expire_consumers(now_ms + 2000)
    assert set(d._parts[0].rosters) == {"other"} and d._parts[0].consumers == 1

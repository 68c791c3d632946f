"""A BEGIN someone else wrote on a markers partition a dispatcher owns (agents.dispatch.events).

Anyone who may write the markers topic may write a BEGIN. Before, one written after the
dispatcher's own made the table fence all its later ACQUIREs while it went on handing out:
what it handed out was tracked by no one and never redelivered (an audit: a message not
acked under a 3 s visibility timeout did not come back in 46 s). Now it begins anew."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest

from agents.dispatch.dispatcher import Dispatcher
from agents.dispatch.epochs import OwnedPartition
from kmq.settings import Settings


@pytest.fixture
def begins():
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.ERROR)
    yield []
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.NOTSET)


def dispatcher(begins: list, member_until: float = math.inf) -> Dispatcher:
    d = Dispatcher(Settings(), configs=lambda: None, membership=lambda: member_until)
    d._lanes = SimpleNamespace(begin=lambda m, epoch, failed: begins.append((m, epoch)))
    d._reader = SimpleNamespace(end_offset=lambda *a: 0)
    d._parts[3] = OwnedPartition(7, ready=True, cursors={("q", 0): 10})
    return d


def test_a_begin_not_ours_after_ours_begins_anew(begins):
    d = dispatcher(begins)
    d._begun(3, (1 << 64) - 1, {("q", 0): 10}, {})
    assert d.stats["foreign-begins"] == 1
    ((m, epoch),) = begins
    part = d._parts[3]
    assert m == 3 and part.epoch == epoch != 7 and not part.ready  # waits for its own BEGIN
    d._begun(3, epoch, {("q", 0): 4}, {})  # ours applied: from the table's cursors
    assert part.ready and part.cursors == {("q", 0): 4}


def test_a_begin_before_ours_is_applied_is_not_a_reason_to_begin_again(begins):
    d = dispatcher(begins)
    d._parts[3].ready = False  # ours written, not yet applied: an older one (or a forged one) first
    d._begun(3, 99, {}, {})
    assert begins == [] and d.stats["foreign-begins"] == 0 and not d._parts[3].ready
    d._begun(3, 7, {("q", 0): 10}, {})
    assert d._parts[3].ready


def test_outside_its_membership_it_ends_the_epoch_and_leaves_beginning_to_the_next_tick(begins):
    d = dispatcher(begins, member_until=-math.inf)
    d._begun(3, 12345, {}, {})
    assert begins == [] and 3 not in d._parts and d.stats["foreign-begins"] == 1

"""A dispatch round that fails leaves no FLOOR behind for the next round to write: the
round's ACQUIREs were not written, so a FLOOR past their records would make a successor
skip them (agents/dispatch/dispatcher.py, ``_run``)."""

from __future__ import annotations

from types import SimpleNamespace

from agents.dispatch.dispatcher import Dispatcher
from kmq.protocol import markers as M
from kmq.settings import Settings


def test_a_failed_round_drops_the_floors_it_gathered():
    d = Dispatcher(Settings(), configs=lambda: None)
    d._set_up = lambda: True  # no broker: the thread's clients are stand-ins
    d._lanes = SimpleNamespace(lanes_waiting=False, producer=SimpleNamespace(flush=lambda t: 0, poll=lambda t: 0))
    d._reader = SimpleNamespace(close=lambda: None)
    d._stop.wait = lambda timeout=None: True  # the pause after a failure, without waiting

    def failing_round() -> bool:
        d._floors.setdefault(3, []).append(M.Floor("orders", 0, 120, 7))   # past dropped duplicates
        d._floors[3].append(M.Floor("ordered", 1, 40, 7))  # an ordered queue's
        d._stop.set()  # one round
        raise RuntimeError("a broker blip between gathering and writing")

    d._round = failing_round
    d._run()
    assert d._floors == {}

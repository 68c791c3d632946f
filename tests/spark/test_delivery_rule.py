"""``deliveries()`` ends each delivery as the tracker's state machine does, on the same log.

Each case is one markers partition of hand-made records; the tracker's side is
:class:`kmq.protocol.state.PartitionState` fed the same markers in the same order, with
TICKs run as ``agents/track_markers.py`` runs them (``expiry.tick_time``, then ``due`` and
``settle``). A settle the tracker counted must be the delivery's outcome in Spark; one it
found late (the delivery taken back first) must leave it ``timed-out``, ``settled_late``.
No broker: the records are a DataFrame in the Kafka source's schema.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kmq.protocol import expiry
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.clock import PartitionClock
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore
from kmq.spark import jobs
from kmq.spark.events import marker_events
from kmq.spark.source import kafka_schema

pytestmark = pytest.mark.slow

T = 2_000_000_000_000  # marker time origin (ms)
SETTLES = (M.Ack, M.Release, M.Reject)


# name -> (records as (dt_ms, [marker specs]), {delivery: (outcome, settled_late)})
CASES = {
    # The ACK is past the deadline in time, but no TICK at or past it came first: acked.
    "ack-before-the-deciding-tick": ([(0, [("start", 1000)]), (950, [("tick", 900)]), (1100, [("ack",)]),
                                      (1200, [("tick", 1200)])], {1: ("acked", False)}),
    # The audit's case: the TICK took it back, the ACK came after (the tracker: late).
    "ack-after-the-tick": ([(0, [("start", 1000)]), (1005, [("tick", 1000)]), (1100, [("ack",)])],
                           {1: ("timed-out", True)}),
    "release-after-the-tick": ([(0, [("start", 1000)]), (1000, [("tick", 1000)]), (1100, [("release",)])],
                               {1: ("timed-out", True)}),
    "reject-after-the-tick": ([(0, [("start", 1000)]), (1000, [("tick", 1000)]), (1100, [("reject",)])],
                              {1: ("timed-out", True)}),
    # A TICK runs at its own time, not its record's (appended 20 ms after the deadline).
    "tick-runs-at-its-own-time": ([(0, [("start", 1000)]), (1020, [("tick", 990)]), (1030, [("ack",)])],
                                  {1: ("acked", False)}),
    "extend-in-time-keeps-it": ([(0, [("start", 1000)]), (500, [("extend", 2000)]), (1500, [("tick", 1500)]),
                                 (1600, [("ack",)])], {1: ("acked", False)}),
    # An EXTEND after the TICK is late too: it pushes nothing.
    "extend-after-the-tick": ([(0, [("start", 1000)]), (1000, [("tick", 1000)]), (1100, [("extend", 5000)]),
                               (1200, [("ack",)])], {1: ("timed-out", True)}),
    # An EXTEND sets the deadline, earlier too (entries.InFlight.move).
    "shorter-extend": ([(0, [("start", 10_000)]), (500, [("extend", 100)]), (700, [("tick", 700)]),
                        (800, [("ack",)])], {1: ("timed-out", True)}),
    # Fetched again after it was taken back: a new delivery, acked.
    "fetched-again": ([(0, [("start", 1000)]), (1000, [("tick", 1000)]), (1500, [("start", 1000)]),
                       (1600, [("ack",)])], {1: ("timed-out", False), 2: ("acked", False)}),
    # A timeout of 0 after a TICK stamped ahead of the START: due only at a later TICK.
    "zero-timeout-needs-a-later-tick": ([(-10, [("tick", 50)]), (0, [("start", 0)]), (20, [("ack",)])],
                                        {1: ("acked", False)}),
}


def build(spec, r: M.RangeRef) -> M.Marker:
    kind, *args = spec
    return {"start": lambda: M.Start(r, args[0], 1), "extend": lambda: M.Extend(r, 1, args[0]),
            "ack": lambda: M.Ack(r, 1), "release": lambda: M.Release(r, 1, 0),
            "reject": lambda: M.Reject(r, 1, "bad"), "tick": lambda: M.Tick(T + args[0])}[kind]()


def tracker_counts_first_settle(records, r: M.RangeRef) -> dict[int, bool]:
    """Per delivery with a settle: did the state machine take its first settle (not late)?"""
    state = PartitionState(MemoryStore())
    clock = PartitionClock(start_ms=0, mono_s=lambda: 0.0)  # marker time only, as a LogAppendTime topic
    counted: dict[int, bool] = {}
    delivery = 0
    for dt, specs in records:
        now_ms = clock.observe(T + dt)
        for spec in specs:
            m = build(spec, r)
            if isinstance(m, M.Tick):  # agents/track_markers.py _tick: due at the TICK's own time
                due = state.due(expiry.tick_time(clock.observe(m.now_ms), m.now_ms))
                state.settle(due)
                continue
            applied = state.apply(m, now_ms)
            delivery += isinstance(m, M.Start)
            if isinstance(m, SETTLES) and delivery not in counted:
                counted[delivery] = applied.what != Outcome.LATE and applied.count == 1
    return counted


@pytest.fixture(scope="module")
def outcomes(spark):
    rows = []
    for part, (name, (records, _)) in enumerate(CASES.items()):
        r = M.RangeRef(name, 0, 0, 1)
        for off, (dt, specs) in enumerate(records):
            at = datetime.fromtimestamp((T + dt) / 1000, tz=timezone.utc)
            rows.append((b"q", marker_codec.encode([build(s, r) for s in specs]), "markers", part, off, at, 1))
    events = marker_events(spark.createDataFrame(rows, kafka_schema()))
    dels = jobs.deliveries(events, as_of_ms=T + 60_000).collect()
    return {(d.queue, d.delivery): d for d in dels}


@pytest.mark.parametrize("name", list(CASES))
def test_a_delivery_ends_as_the_tracker_ended_it(outcomes, name):
    records, expected = CASES[name]
    assert {n: outcomes[(name, n)].outcome for n in expected} == {n: e[0] for n, e in expected.items()}
    assert {n: outcomes[(name, n)].settled_late for n in expected} == {n: e[1] for n, e in expected.items()}
    # The tracker, on the same log: a settle it counted is the outcome; one it found late is not.
    for n, counted in tracker_counts_first_settle(records, M.RangeRef(name, 0, 0, 1)).items():
        assert counted == (not outcomes[(name, n)].settled_late), (name, n)
        if not counted:
            assert (outcomes[(name, n)].settled_ms, outcomes[(name, n)].processing_ms) == (None, None)


def test_a_late_ack_has_no_processing_time_and_the_deadline_is_the_one_passed(outcomes):
    late = outcomes[("ack-after-the-tick", 1)]
    assert (late.deadline_ms, late.processing_ms, late.settled_ms) == (T + 1000, None, None)
    on_time = outcomes[("ack-before-the-deciding-tick", 1)]
    assert (on_time.deadline_ms, on_time.processing_ms, on_time.settled_ms) == (T + 1000, 1100, T + 1100)

"""bench.chaos_trace: a failed chaos run's ids followed through the consumer logs and the markers."""

import json

from bench.chaos_ledger import parse_log
from bench.chaos_trace import trace


def log(*events):
    return [json.dumps(e) for e in events]


def marker(kind, p, off, ts_ms, start, end, **extra):
    return {"p": p, "off": off, "ts": ts_ms, "k": kind, "q": "q0", "qp": 0, "s": start, "e": end,
            "o": list(range(start, end)), **extra}


def test_each_copy_of_an_id_is_followed_through_its_markers_in_time_order():
    a = log({"e": "recv", "m": [["m1", 1, 0, 10], ["m2", 1, 0, 11]], "t": 1.0},
            {"e": "acking", "ids": ["m1", "m2"], "t": 1.1},
            {"e": "settled", "acked": ["m1", "m2"], "t": 1.2})
    b = log({"e": "recv", "m": [["m1", 2, 0, 40]], "t": 5.5}) + ['{"e": "recv", "m": [["m1"', '"m1"']
    dump = [marker("Acquire", 3, 7, 900, 10, 12, epoch=5, timeout_ms=4000),
            marker("Ack", 3, 9, 1150, 10, 12),
            marker("Acquire", 3, 30, 5400, 40, 41, epoch=5, timeout_ms=4000),
            marker("Ack", 3, 31, 5450, 50, 51),  # another copy: not m1's
            {"p": 3, "off": 8, "ts": 1000, "k": "Tick", "now_ms": 1000}]
    got = trace(["m1"], {"m1": "q0", "m2": "q0"}, {"a": a, "b": b}, dump, {"a": "killed", "b": "running"})
    assert list(got) == ["m1"]
    assert [(e["e"], e.get("by"), e.get("offset")) for e in got["m1"]] == [
        ("Acquire", None, 10), ("recv", "a (killed)", 10), ("acking", "a (killed)", None),
        ("Ack", None, 10), ("acked", "a (killed)", None), ("Acquire", None, 40), ("recv", "b (running)", 40)]
    assert got["m1"][0]["markers"] == "3@7" and got["m1"][0]["epoch"] == 5 and got["m1"][-1]["count"] == 2


def test_an_id_of_another_queue_at_the_same_offset_is_not_confused():
    a = log({"e": "recv", "m": [["m1", 1, 0, 10]], "t": 1.0})
    dump = [{**marker("Acquire", 3, 7, 900, 10, 11, epoch=5), "q": "q1"}]
    assert [e["e"] for e in trace(["m1"], {"m1": "q0"}, {"a": a}, dump)["m1"]] == ["recv"]


def test_old_two_field_recv_entries_are_still_read():
    a = log({"e": "recv", "m": [["m1", 1]], "t": 1.0}, {"e": "recv", "m": [["m1", 2, 0, 5]], "t": 2.0})
    assert [e.get("offset") for e in trace(["m1"], {"m1": "q0"}, {"a": a}, [])["m1"]] == [None, 5]
    parsed = parse_log("a", a)
    assert parsed.recv == [(1.0, "m1", 1), (2.0, "m1", 2)] and parsed.received["m1"] == 2

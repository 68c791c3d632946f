"""bench.chaos_deadlines: only an ack behind a TICK past its copy's deadline is late, and
the ledger excuses a redelivery after such an ack only (bench.chaos_ledger rule 2)."""

import json

from hypothesis import given, strategies as st

from bench.chaos_deadlines import late_acks
from bench.chaos_ledger import account, parse_log

KEY = ("q0", 0, 10)


def line(k, off, ts, p=1, **extra):
    out = {"p": p, "off": off, "ts": ts, "k": k, **extra}
    if k != "Tick" and k != "Begin":
        out.update(q="q0", qp=0, s=10, e=11, o=[10])
    return out


def acquire(off, ts, epoch=7, timeout_ms=4000):
    return line("Acquire", off, ts, epoch=epoch, timeout_ms=timeout_ms)


def tick(off, now_ms):
    return line("Tick", off, now_ms, now_ms=now_ms)


def test_an_ack_before_any_tick_past_the_deadline_is_not_late():
    dump = [line("Begin", 0, 0, epoch=7), acquire(1, 1000), tick(2, 4999), line("Ack", 3, 5500)]
    assert late_acks(dump) == set()  # its ts is past the deadline, but no TICK was


def test_an_ack_behind_a_tick_at_the_deadline_is_late():
    dump = [line("Begin", 0, 0, epoch=7), acquire(1, 1000), tick(2, 5000), line("Ack", 3, 5001)]
    assert late_acks(dump) == {KEY}


def test_an_extend_moves_the_deadline_and_a_fenced_acquire_sets_none():
    extended = [line("Begin", 0, 0, epoch=7), acquire(1, 1000), line("Extend", 2, 3000, timeout_ms=4000),
                tick(3, 6000), line("Ack", 4, 6001)]
    assert late_acks(extended) == set()
    fenced = [line("Begin", 0, 0, epoch=8), acquire(1, 1000, epoch=7), tick(2, 9000), line("Ack", 3, 9001)]
    assert late_acks(fenced) == set()


def test_a_tick_before_the_hand_out_does_not_count():
    dump = [line("Begin", 0, 0, epoch=7), tick(1, 9000), acquire(2, 1000), line("Ack", 3, 1100)]
    assert late_acks(dump) == set()


def test_other_partitions_ticks_do_not_count():
    dump = [line("Begin", 0, 0, epoch=7), acquire(1, 1000), {**tick(1, 9000), "p": 2}, line("Ack", 2, 1100)]
    assert late_acks(dump) == set()


@given(st.integers(0, 10_000), st.integers(1, 10_000), st.lists(st.integers(0, 30_000), max_size=8))
def test_late_exactly_when_a_tick_after_the_hand_out_reached_the_deadline(acquired, timeout, tick_times):
    dump = [line("Begin", 0, 0, epoch=7), acquire(1, acquired, timeout_ms=timeout)]
    dump += [tick(2 + n, t) for n, t in enumerate(tick_times)]
    dump.append(line("Ack", 99, 0))
    assert (KEY in late_acks(dump)) == any(t >= acquired + timeout for t in tick_times)


def _logs():
    a = parse_log("a", [json.dumps(e) for e in (
        {"e": "recv", "m": [["m1", 1, 0, 10]], "t": 1.0},
        {"e": "acking", "ids": ["m1"], "t": 5.0},
        {"e": "settled", "acked": ["m1"], "t": 5.1})])
    b = parse_log("b", [json.dumps({"e": "recv", "m": [["m1", 2, 0, 40]], "t": 6.0})])
    return a, b


def test_the_ledger_excuses_a_redelivery_after_a_late_ack_only():
    a, b = _logs()
    assert a.acked_copy == {"m1": (0, 10)}
    strict = account(["m1"], [a, b], {})
    assert strict.unexplained_after_ack == ["m1"] and strict.unexplained_duplicates == ["m1"]
    excused = account(["m1"], [a, b], {}, acked_late={"m1"})
    assert excused.violations == [] and excused.redelivered_after_durable_ack == 0
    assert (excused.acked_late, excused.redelivered_after_late_ack, excused.duplicates_after_late_ack) == (1, 1, 1)
    assert excused.duplicates == 1

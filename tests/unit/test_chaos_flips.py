"""bench.chaos_flips and bench.chaos_periods: a seed gives one flip plan, every flip changes
the mode, about 3 in 10 get a second within 100 ms; the ledger checks a group's order only
inside an ordered period; a wrong flip option is refused naming it."""

import json

import pytest
from hypothesis import given, strategies as st

from bench.chaos_config import ChaosConfig, parse_config
from bench.chaos_flips import MODES, SECOND_FLIP_WITHIN_S, flip_schedule
from bench.chaos_ledger import parse_log
from bench.chaos_periods import ordered_periods, reordered_in_periods, repeat_figures
from kmq.errors import ConfigError


def test_the_same_seed_gives_the_same_plan_and_another_seed_another():
    assert flip_schedule(3, 100) == flip_schedule(3, 100)
    assert flip_schedule(3, 100) != flip_schedule(4, 100)


@given(st.integers(0, 10_000), st.floats(0.5, 3), st.floats(0, 4))
def test_every_flip_changes_the_mode_within_the_span_and_bounds(seed, lo, extra):
    hi = lo + extra
    plan = flip_schedule(seed, 60, (lo, hi))
    mode, last_first = "shared", 0.0
    for flip in plan:
        assert flip.mode != mode and flip.mode in MODES and flip.at_s < 60 + SECOND_FLIP_WITHIN_S
        gap = flip.at_s - last_first
        # a first flip follows the previous first one by lo..hi s; a second by at most 100 ms
        assert lo - 1e-3 <= gap <= hi + 1e-3 or gap <= SECOND_FLIP_WITHIN_S + 1e-3
        if gap > SECOND_FLIP_WITHIN_S + 1e-3:
            last_first = flip.at_s
        mode = flip.mode


def test_about_three_flips_in_ten_get_a_second_within_100_ms():
    plan = flip_schedule(1, 30_000)
    seconds = sum(1 for a, b in zip(plan, plan[1:]) if b.at_s - a.at_s <= SECOND_FLIP_WITHIN_S)
    assert 0.27 < seconds / (len(plan) - seconds) < 0.33


def test_only_the_modes_asked_are_used():
    assert {f.mode for f in flip_schedule(5, 200, modes=("partition", "shared"))} == {"partition", "shared"}


def flip(mode, asked, returned=None, error=None):
    return {"queue": "q", "mode": mode, "asked": asked, "returned": returned or asked + 0.1, "error": error}


def test_an_ordered_period_runs_from_its_flip_returning_to_the_next_flip_asked():
    flips = [flip("ordered", 10, 10.5), flip("partition", 20), flip("ordered", 30, 31, error="timeout"),
             flip("shared", 40), flip("ordered", 50, 50.2)]
    assert ordered_periods(flips, end=99) == [(10.5, 20), (50.2, 99)]


def log(name, *events, ending="running"):
    return parse_log(name, [json.dumps(e) for e in events], ending)


def recv(t, *ids):
    return {"e": "recv", "m": [[i, 1] for i in ids], "t": t}


def acking(t, *ids):
    return {"e": "acking", "ids": list(ids), "t": t}


GROUPS = {"q/g0": ["a", "b", "c"]}


def test_a_message_handed_out_before_its_predecessor_settled_inside_an_ordered_period_is_flagged():
    sent_at = {"a": 11, "b": 12, "c": 13}
    both = log("x", recv(14, "a", "b"), acking(15, "a", "b"), recv(16, "c"), acking(17, "c"))
    assert reordered_in_periods(GROUPS, sent_at, [(10, 30)], [both], {}) == (["b"], 2)


def test_order_is_not_checked_across_flips_nor_after_the_period_ended():
    both = log("x", recv(14, "a", "b", "c"), acking(15, "a", "b", "c"))
    # a sent before the period, b and c inside it but handed out after it ended
    assert reordered_in_periods(GROUPS, {"a": 5, "b": 12, "c": 13}, [(10, 13.5)], [both], {}) == ([], 0)
    # a in one period, b and c in the next: b may overtake a, and c, handed out after the
    # period ended, b; inside it, c may not
    late = log("y", recv(24, "b"), recv(31, "a", "c"), acking(32, "a", "b", "c"))
    assert reordered_in_periods(GROUPS, {"a": 11, "b": 21, "c": 22}, [(10, 20), (20.5, 30)], [late], {}) == ([], 0)
    early = log("y", recv(24, "b", "c"), acking(25, "b", "c"), recv(31, "a"), acking(32, "a"))
    assert reordered_in_periods(GROUPS, {"a": 11, "b": 21, "c": 22}, [(10, 20), (20.5, 30)], [early], {}) == (["c"], 1)


def test_acks_by_two_processes_and_a_count_received_twice_are_counted():
    one = log("x", recv(1, "a", "b"), {"e": "settled", "acked": ["a", "b"], "t": 2})
    two = log("y", recv(3, "a"), {"e": "settled", "acked": ["a"], "t": 4})
    assert repeat_figures([one, two]) == {"acked_more_than_once": 1, "same_count_received_again": 1,
                                          "same_count_receipts_beyond_first": 1}


def test_flips_need_shared_dispatch_two_known_modes_and_no_ordered_queues():
    ok = dict(dispatch="shared", flip_modes=("partition", "ordered"))
    ChaosConfig(**ok)
    for wrong in ({"dispatch": "partition"}, {"flip_modes": ("shared",)}, {"flip_modes": ("shared", "fifo")},
                  {"ordered_queues": 1}, {"flip_every_s": (5.0, 1.0)}):
        with pytest.raises(ConfigError):
            ChaosConfig(**{**ok, **wrong})


def test_the_options_ask_for_flips_and_spread_tracker_kills(capsys):
    _args, cfg = parse_config(["--dispatch", "shared", "--flip-modes", "partition,shared,ordered",
                               "--flip-every-s", "1,5", "--tracker-kills", "keep,keep,keep", "--consumers", "4"])
    assert cfg.flip_modes == MODES and cfg.flip_every_s == (1.0, 5.0) and cfg.consumers_per_queue == 4
    assert cfg.tracker_kills == [(0.25, "keep"), (0.5, "keep"), (0.75, "keep")]
    assert parse_config([])[1].tracker_kills == [(0.2, "keep"), (0.45, "wipe"), (0.7, "keep"), (0.9, "wipe")]
    with pytest.raises(SystemExit):
        parse_config(["--flip-modes", "partition,shared"])  # --dispatch partition
    assert "--flip-modes partition,shared needs --dispatch shared" in capsys.readouterr().err

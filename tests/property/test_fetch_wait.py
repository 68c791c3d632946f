"""FetchWait: a reader's fetch wait doubles only after a partition stalled or crawled for
stall_s while behind its end; never for a reader that keeps up or reads at a usual pace;
a crawl's raise stands only if the records a second grew."""

import pytest
from hypothesis import given, settings, strategies as st

from kmq.errors import ConfigError
from kmq.kafka.fetch_wait import KEEP_GAIN, MAX_WAIT_MS, TRIAL_LAPSE_STALLS, FetchWait


def test_a_stalled_partition_doubles_the_wait_once_per_stall_s_up_to_the_cap():
    w = FetchWait(10, max_wait_ms=40, stall_s=1.0, min_records=1)
    assert not w.observe(100.0, "p0", behind=True, position=5)
    assert not w.observe(100.9, "p0", behind=True, position=5), "not yet stall_s"
    assert w.observe(101.0, "p0", behind=True, position=5) and w.wait_ms == 20
    assert not w.observe(101.5, "p0", behind=True, position=5), "a whole stall_s at the new wait first"
    assert w.observe(102.0, "p0", behind=True, position=5) and w.wait_ms == 40
    assert not w.observe(110.0, "p0", behind=True, position=5) and w.wait_ms == 40, "capped"
    assert w.raises == 2


def test_a_crawl_below_min_records_a_window_raises_a_usual_pace_does_not():
    w = FetchWait(20, stall_s=1.0, min_records=1000)
    w.observe(0.0, "fast", behind=True, position=0)
    w.observe(0.0, "slow", behind=True, position=0)
    assert not w.observe(1.0, "fast", behind=True, position=5000), "5,000 a second: a usual pace"
    assert not w.observe(2.0, "fast", behind=True, position=10000)
    assert w.observe(1.0, "slow", behind=True, position=240) and w.wait_ms == 40


def test_a_backlog_of_big_records_is_no_crawl():
    w = FetchWait(20, stall_s=1.0, min_records=1000, min_bytes=1 << 20)
    w.observe(0.0, "p", behind=True, position=0, read_bytes=0)
    assert not w.observe(1.0, "p", behind=True, position=3, read_bytes=3 << 20), "3 records of 1 MiB"
    assert w.observe(2.0, "p", behind=True, position=4, read_bytes=(3 << 20) + 100)


def test_keeping_up_is_no_stall():
    w = FetchWait(10, stall_s=1.0, min_records=1)
    for t in range(100):
        w.observe(float(t), "idle", behind=False, position=t)
        w.observe(float(t), "busy", behind=True, position=t * 10)
    assert w.wait_ms == 10 and w.raises == 0


def test_catching_up_or_seeking_back_starts_a_new_window():
    w = FetchWait(10, stall_s=1.0, min_records=1)
    w.observe(0.0, "p", behind=True, position=100)
    w.observe(0.9, "p", behind=False, position=100)
    assert not w.observe(1.5, "p", behind=True, position=100)
    assert not w.observe(2.0, "p", behind=True, position=50), "sought back"
    assert not w.observe(2.9, "p", behind=True, position=50)
    assert w.observe(3.0, "p", behind=True, position=50)


def test_a_forgotten_partition_starts_over():
    w = FetchWait(10, stall_s=1.0)
    w.observe(0.0, "p", behind=True, position=0)
    w.forget("p")
    assert not w.observe(1.5, "p", behind=True, position=0)
    w.forget_all()
    assert not w.observe(2.6, "p", behind=True, position=0)


def test_a_reader_configured_above_the_cap_keeps_its_wait():
    assert FetchWait.starting_at(MAX_WAIT_MS + 400).max_wait_ms == MAX_WAIT_MS + 400
    assert FetchWait.starting_at(10).max_wait_ms == MAX_WAIT_MS


@pytest.mark.parametrize("kwargs, field", [
    ({"wait_ms": 0}, "wait_ms"), ({"wait_ms": True}, "wait_ms"), ({"wait_ms": 1.5}, "wait_ms"),
    ({"wait_ms": 100, "max_wait_ms": 50}, "max_wait_ms"), ({"wait_ms": 10, "stall_s": 0}, "stall_s"),
    ({"wait_ms": 10, "min_records": 0}, "min_records"), ({"wait_ms": 10, "min_bytes": -1}, "min_bytes")])
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        FetchWait(**kwargs)


# Mostly crawls (a few records a look) so that trials are judged, with jumps and seeks back.
looks = st.lists(st.tuples(st.floats(0, 1.5), st.sampled_from("abc"), st.booleans() | st.just(True),
                           st.integers(0, 40) | st.integers(-50, 3000), st.integers(0, 1 << 20) | st.just(0)),
                 max_size=300)


@settings(max_examples=300)
@given(st.integers(1, 2000), st.integers(1, 2000), st.integers(1, 4 << 20), looks)
def test_the_wait_matches_a_model_of_windows_and_trials(start_ms, min_records, min_bytes, steps):
    """Against a model: per partition, when, where and at what byte count it fell behind;
    a crawl's raise judged by the same partition's next window."""
    cap = max(start_ms, MAX_WAIT_MS)
    w = FetchWait(start_ms, max_wait_ms=cap, stall_s=1.0, min_records=min_records, min_bytes=min_bytes)
    model_wait, window, now, positions, read = start_ms, {}, 0.0, {}, 0
    trial, settled = None, False  # (partition, wait before, rate before)

    def raise_(p, pos, rate):
        nonlocal model_wait, window, trial
        if model_wait >= cap:
            return False
        trial, model_wait = (p, model_wait, rate, now), min(cap, model_wait * 2)
        window = {q: (now, pos, read) if q == p else (now, at, b) for q, (_t, at, b) in window.items()}
        return True

    for dt, p, behind, step, got_bytes in steps:
        now += dt
        pos = positions[p] = max(0, positions.get(p, 0) + step)
        read += got_bytes
        changed = w.observe(now, p, behind=behind, position=pos, read_bytes=read)
        expect = False
        if not behind:
            window.pop(p, None)
            trial = None if trial and trial[0] == p else trial
        else:
            t0, p0, b0 = window.setdefault(p, (now, pos, read))
            if pos < p0:
                window[p] = (now, pos, read)
            elif now - t0 >= 1.0:
                window[p] = (now, pos, read)
                came, rate = pos - p0, (pos - p0) / (now - t0)
                if came >= min_records or read - b0 >= min_bytes:
                    trial = None if trial and trial[0] == p else trial
                elif came == 0:
                    trial, settled = None, False
                    expect = raise_(p, pos, 0.0)
                elif trial and trial[0] != p and now - trial[3] < TRIAL_LAPSE_STALLS * 1.0:
                    pass
                elif trial and trial[0] == p and rate < trial[2]:
                    expect, settled, model_wait, trial = True, True, trial[1], None
                    window = {q: (now, pos, read) if q == p else (now, at, b) for q, (_t, at, b) in window.items()}
                elif trial and trial[0] == p and rate < KEEP_GAIN * trial[2]:
                    settled, trial = True, None
                elif not settled:
                    trial = None
                    expect = raise_(p, pos, rate)
                else:
                    trial = None
        assert changed == expect
        assert w.wait_ms == model_wait
        assert start_ms <= w.wait_ms <= cap


def test_a_crawls_raise_that_helps_stands_and_the_next_crawl_raises_again():
    w = FetchWait(20, stall_s=1.0, min_records=1000)
    w.observe(0.0, "p", behind=True, position=0)
    assert w.observe(1.0, "p", behind=True, position=200) and w.wait_ms == 40, "200 a second: a crawl"
    assert w.observe(2.0, "p", behind=True, position=500) and w.wait_ms == 80, "300 a second >= 1.5 x 200"
    assert not w.observe(3.0, "p", behind=True, position=2000) and w.wait_ms == 80, "a usual pace"
    assert w.observe(4.0, "p", behind=True, position=2100) and w.wait_ms == 160, "a crawl again"


def test_a_crawls_raise_that_slows_the_reader_is_taken_back_and_crawls_raise_no_more():
    w = FetchWait(160, stall_s=1.0, min_records=5000)
    w.observe(0.0, "p", behind=True, position=0)
    assert w.observe(1.0, "p", behind=True, position=1700) and w.wait_ms == 320
    assert w.observe(2.0, "p", behind=True, position=2900) and w.wait_ms == 160, "1,200 a second < 1,700"
    assert "back to 160 ms" in w.why(40000, 2900)
    assert not w.observe(3.0, "p", behind=True, position=3000) and w.wait_ms == 160, "settled"
    assert w.observe(4.0, "p", behind=True, position=3000) and w.wait_ms == 320, "nothing at all still raises"
    assert "raised to 320 ms" in w.why(40000, 3000)


def test_a_crawls_raise_that_helps_a_little_stands_but_crawls_raise_no_more():
    w = FetchWait(20, stall_s=1.0, min_records=1000)
    w.observe(0.0, "p", behind=True, position=0)
    assert w.observe(1.0, "p", behind=True, position=200) and w.wait_ms == 40
    assert not w.observe(2.0, "p", behind=True, position=450) and w.wait_ms == 40, "250 a second: < 1.5 x"
    assert not w.observe(3.0, "p", behind=True, position=500) and w.wait_ms == 40


def test_another_partitions_crawl_waits_for_the_trial():
    w = FetchWait(20, stall_s=1.0, min_records=1000)
    w.observe(0.0, "a", behind=True, position=0)
    w.observe(0.0, "b", behind=True, position=0)
    assert w.observe(1.0, "a", behind=True, position=100) and w.wait_ms == 40
    assert not w.observe(2.0, "b", behind=True, position=100) and w.wait_ms == 40, "a's trial first"
    assert w.observe(2.0, "a", behind=True, position=400) and w.wait_ms == 80, "300 a second >= 1.5 x 100"


def test_a_trial_its_partition_never_judges_lapses_and_stands():
    w = FetchWait(20, stall_s=1.0, min_records=1000)
    w.observe(0.0, "gone", behind=True, position=0)
    w.observe(0.0, "b", behind=True, position=0)
    assert w.observe(1.0, "gone", behind=True, position=100) and w.wait_ms == 40
    assert not w.observe(2.0, "b", behind=True, position=100), "gone's trial first"
    assert not w.observe(4.0, "b", behind=True, position=200)
    assert w.observe(5.0, "b", behind=True, position=300) and w.wait_ms == 80, "lapsed after 4 stall_s"


def test_the_log_line_says_what_was_seen_and_where_to_read_why():
    w = FetchWait(10, stall_s=0.5, min_records=1)
    w.observe(0.0, "p", behind=True, position=40000)
    w.observe(0.5, "p", behind=True, position=40000)
    assert w.why(40001, 40000) == ("fetch wait raised to 20 ms: the partition ended at 40001, and nothing past "
                                   "40000 came in 0.5 s (the embedded broker on a partition of many small "
                                   "batches, docs/shared-queues.md)")
    assert "fewer than 500 records past 3" in FetchWait(10, min_records=500).why(5, 3)

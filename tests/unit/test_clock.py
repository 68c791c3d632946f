"""The deadline clock: trusted marker time plus monotonic time, never backwards."""

from hypothesis import given, strategies as st

from kmq.protocol.clock import REPLAY_EARLIEST_MS, TICK_AHEAD_LIMIT_MS, PartitionClock, tick_refused, written_at_ms
from kmq.protocol.limits import MAX_TIME_MS


class FakeMonotonic:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_advances_with_the_monotonic_clock_between_trusted_times():
    mono = FakeMonotonic()
    c = PartitionClock(start_ms=1_000_000, mono_s=mono)
    mono.t += 2.5
    assert c.now_ms() == 1_002_500


def test_a_trusted_time_ahead_moves_it_forward():
    mono = FakeMonotonic()
    c = PartitionClock(start_ms=1_000_000, mono_s=mono)
    assert c.observe(1_500_000) == 1_500_000
    mono.t += 1
    assert c.now_ms() == 1_501_000


def test_a_trusted_time_behind_never_moves_it_back():
    mono = FakeMonotonic()
    c = PartitionClock(start_ms=1_000_000, mono_s=mono)
    mono.t += 1
    assert c.observe(10) == 1_001_000
    assert c.now_ms() == 1_001_000


@given(wall=st.integers(0, MAX_TIME_MS), marker_ahead=st.integers(-10**9, 10**9), tick=st.integers(0, MAX_TIME_MS))
def test_a_tick_is_refused_only_when_far_ahead_of_both_the_wall_clock_and_marker_time(wall, marker_ahead, tick):
    marker = max(0, wall + marker_ahead)
    refused = tick_refused(tick, wall, marker)
    assert (refused is not None) == (tick > max(wall, marker) + TICK_AHEAD_LIMIT_MS)


def test_a_trackers_own_tick_is_never_refused_nor_one_a_little_ahead():
    # Its own: the marker time it was proposed at, however far the broker's stamps moved it.
    assert tick_refused(5_000_000, wall_ms=1_000_000, marker_ms=5_000_000) is None
    assert tick_refused(1_000_000 + TICK_AHEAD_LIMIT_MS, 1_000_000, 0) is None  # hosts' clocks differ a little
    assert "ahead" in tick_refused(1_000_000 + 10 * 86_400_000, 1_000_000, 1_000_000)


def test_a_record_read_again_after_a_takeover_counts_at_its_trusted_stamp():
    # An audit's takeover: what the previous owner was told just before it died (an ACQUIRE,
    # a consumer's EXTEND) got its deadline from when the successor read it: up to a whole
    # visibility timeout late (messages back 11-13 s after their deadline).
    from kmq.protocol.clock import REPLAY_EARLIEST_MS, applied_at_ms

    owned, clock = 100_000, 105_000
    # The previous owner's ACQUIRE (a tracker's own create time) or any LogAppendTime record:
    assert applied_at_ms(clock, 97_000, owned, trusted_stamp=False, trackers_own=True) == 97_000
    assert applied_at_ms(clock, 97_000, owned, trusted_stamp=True, trackers_own=False) == 97_000
    # ... at most REPLAY_EARLIEST_MS before the ownership began (a clock far behind):
    assert applied_at_ms(clock, 0, owned, False, True) == owned - REPLAY_EARLIEST_MS
    # A consumer's create time (a START, an EXTEND on a CreateTime topic) is not ours to trust.
    assert applied_at_ms(clock, 97_000, owned, trusted_stamp=False, trackers_own=False) == clock
    # Written while we own it, or without a stamp: the clock, as every marker before.
    assert applied_at_ms(clock, 104_000, owned, True, True) == clock
    assert applied_at_ms(clock, None, owned, True, True) == clock
    # Never later than the clock.
    assert applied_at_ms(99_000, 99_500, owned, True, True) == 99_000


@given(st.integers(0, 2**62), st.one_of(st.none(), st.integers(0, 2**62)), st.integers(0, 2**62))
def test_a_record_read_after_a_takeover_is_written_at_its_stamp_within_bounds(clock_ms, stamp_ms, owned_since_ms):
    written = written_at_ms(clock_ms, stamp_ms, owned_since_ms)
    assert written <= clock_ms
    if stamp_ms is None or stamp_ms >= owned_since_ms:  # read as it came: the clock's time
        assert written == clock_ms
    else:
        assert written == min(clock_ms, max(stamp_ms, owned_since_ms - REPLAY_EARLIEST_MS))

"""The deadline clock: trusted marker time plus monotonic time, never backwards."""

from kmq.protocol.clock import PartitionClock


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

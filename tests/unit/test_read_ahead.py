"""The shared consumer's read-ahead policy (kmq.consumer.read_ahead), time passed in."""

from hypothesis import given, strategies as st

from kmq.consumer.read_ahead import PREFETCH_GROWTH, PREFETCH_START, grown


def test_a_slow_consumer_keeps_a_few():
    # 20 ms of work a message: 10 handled in 0.2 s of user code's time
    assert grown(10, 10, 0.2, 1000) == 25
    assert grown(25, 25, 0.5, 1000) == 25


def test_a_fast_consumer_grows_eightfold_up_to_max_in_flight():
    size = PREFETCH_START
    for _ in range(6):
        size = grown(size, size, 0.0, 20_000)  # user code only waited for deliveries
    assert size == 20_000


def test_no_growth_when_the_dispatcher_sent_less_than_asked():
    assert grown(80, 79, 0.001, 1000) == 80


@given(prefetch=st.integers(1, 1 << 20), received=st.integers(0, 1 << 22),
       busy_s=st.floats(0, 3600), max_in_flight=st.integers(1, 1 << 20))
def test_it_never_shrinks_nor_passes_its_bounds(prefetch, received, busy_s, max_in_flight):
    prefetch = min(prefetch, max_in_flight)
    new = grown(prefetch, received, busy_s, max_in_flight)
    assert prefetch <= new <= max(prefetch, min(max_in_flight, prefetch * PREFETCH_GROWTH))

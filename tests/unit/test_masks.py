"""Offset masks are walked bytewise: a hostile mask costs its bytes, never a Python step per bit."""

from __future__ import annotations

import sys

from hypothesis import given, strategies as st

from kmq.protocol import masks


def python_lines(fn, *args):
    """(result, Python lines executed): a deterministic measure of work, unlike wall time."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        out = fn(*args)
    finally:
        sys.settrace(None)
    return out, count


def test_a_mask_with_only_its_top_bit_set_is_walked_in_a_few_steps():
    top = 1 << (1 << 20)  # 1M bits: bit by bit, the queue detail view took 19 s on the event loop
    got, lines = python_lines(masks.first_offsets, 7, top, 1000)
    assert got == [7 + (1 << 20)] and lines < 100
    got, lines = python_lines(masks.lowest_bits, top | 1, 1)
    assert got == 1 and lines < 100


def test_the_queue_detail_view_lists_offsets_bytewise():
    from web.queue_stats import _offsets
    got, lines = python_lines(_offsets, 0, 1 << (1 << 20))
    assert got == [1 << 20] and lines < 100


@given(st.integers(0, 2**600), st.integers(0, 2000), st.integers(0, 10**6))
def test_first_offsets_and_lowest_bits_agree_with_the_plain_definition(mask, limit, start):
    plain = [start + i for i in range(mask.bit_length()) if mask >> i & 1]
    assert masks.first_offsets(start, mask, limit) == plain[:limit]
    assert masks.mask_offsets(start, mask) == plain
    low = masks.lowest_bits(mask, limit)
    assert low & ~mask == 0 and low.bit_count() == min(limit, mask.bit_count())
    assert masks.offsets_mask(start, plain) == mask
    assert masks.mask_of([o - start for o in plain]) == mask

"""Offset bit masks: bit ``i`` of a range's mask stands for offset ``start + i``.

The one place masks are built and walked. Everything here is linear in the
mask's bytes with a C-level step per byte (``int.to_bytes``, ``bytearray``,
a regex over nonzero bytes), never a Python step per bit: a hostile mask with
only its top bit set costs what its size costs, no more.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

_BITS = tuple(tuple(b for b in range(8) if v >> b & 1) for v in range(256))
_POPCOUNT = bytes(len(b) for b in _BITS)
_NONZERO = re.compile(rb"[^\x00]")


def mask_of(rels: Sequence[int] | Iterable[int], length: int | None = None) -> int:
    """The mask selecting relative offsets ``rels`` (O(1) for one run, else linear in the span).

    ``length`` (the range's length) sizes the buffer when known.
    """
    rels = rels if isinstance(rels, (list, tuple, range)) else list(rels)
    if not rels:
        return 0
    lo, hi = min(rels), max(rels)
    if hi - lo + 1 == len(rels):  # one run (distinct offsets)
        return ((1 << len(rels)) - 1) << lo
    ba = bytearray(((length if length is not None else hi + 1) + 7) >> 3)
    for r in rels:
        ba[r >> 3] |= 1 << (r & 7)
    return int.from_bytes(ba, "little")


def offsets_mask(start: int, offsets: Iterable[int]) -> int:
    """The mask selecting absolute ``offsets`` of a range beginning at ``start``."""
    return mask_of([o - start for o in offsets])


def mask_offsets(start: int, mask: int) -> list[int]:
    """The absolute offsets a mask selects, ascending (linear in the mask's size)."""
    return first_offsets(start, mask, mask.bit_count())


def first_offsets(start: int, mask: int, limit: int) -> list[int]:
    """The lowest ``limit`` offsets a mask selects, ascending.

    Zero bytes are skipped by a C-level search, so a sparse mask costs one
    pass over its bytes.
    """
    out: list[int] = []
    if limit <= 0:
        return out
    raw = mask.to_bytes((mask.bit_length() + 7) // 8, "little")
    for hit in _NONZERO.finditer(raw):
        i = hit.start()
        base = start + 8 * i
        out.extend(base + bit for bit in _BITS[raw[i]])
        if len(out) >= limit:
            break
    return out[:limit]


def lowest_bits(mask: int, n: int) -> int:
    """The part of ``mask`` holding its ``n`` lowest set bits (all of it if it has fewer)."""
    if n <= 0:
        return 0
    if mask.bit_count() <= n:
        return mask
    raw = mask.to_bytes((mask.bit_length() + 7) // 8, "little")
    seen = 0
    for hit in _NONZERO.finditer(raw):
        i = hit.start()
        byte = raw[i]
        if seen + _POPCOUNT[byte] >= n:
            cut = 8 * i + _BITS[byte][n - seen - 1] + 1
            return mask & ((1 << cut) - 1)
        seen += _POPCOUNT[byte]
    return mask  # pragma: no cover - bit_count() > n guarantees a cut

"""Which records of an ordered queue partition were handed out above its floor, pure.

A dispatcher of an ordered queue holds records back for their groups, so its durable
cursor is the queue's *floor* (FLOOR), not the highest record read (docs/ordering.md,
"Failover"). A successor reads again from the floor; to neither hand out again what its
predecessor handed out nor lose a group's place, the state machine keeps, per ordered
(queue, partition), the offsets handed out (ordered ACQUIREs) above the floor as a
bitmap, like the incomplete offsets Parallel Consumer keeps in its commit metadata.

Bit ``i`` stands for offset ``base + i``. A FLOOR moves ``base`` up to the floor and
drops the bits below it. The bitmap keeps at most ``MAX_HANDED_BITS`` bits: an ACQUIRE
beyond drops the lowest bits and moves ``base`` up, so an offset below ``base`` is
*unknown* and read as waiting (handed out again: at-least-once, never lost).

A successor reading record ``offset`` learns (:func:`status`):

- ``IN_FLIGHT``: bit set and the tracker's table still has it pending;
- ``SETTLED``: bit set, nothing pending (acked, dead-lettered, or republished: a copy
  of it, same message id, lies further up the partition);
- ``WAITING``: bit clear (or unknown): never handed out, hand it out in its turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmq.protocol.limits import MAX_RANGE_LEN

# Two read windows (ORDERED_WINDOW_OFFSETS, 65,535): a FLOOR trims the bitmap after the
# ACQUIREs of its record, which may reach one window past a floor that moved up since
# the last FLOOR. 16 KiB at most.
MAX_HANDED_BITS = 2 * MAX_RANGE_LEN

WAITING = "waiting"
IN_FLIGHT = "in-flight"
SETTLED = "settled"


@dataclass(frozen=True, slots=True)
class HandedOut:
    """Offsets ``base + i`` for every bit ``i`` set in ``mask`` were handed out."""

    base: int
    mask: int = 0

    def mark(self, start: int, mask: int) -> "HandedOut":
        """Offsets ``start + i`` for bits ``i`` of ``mask`` were handed out (an ordered ACQUIRE).
        Offsets below ``base`` are below the floor: not kept. Bounded: past
        ``MAX_HANDED_BITS`` the lowest offsets become unknown (read as waiting); the base
        moves up before the bits are placed (placed first, a forged ACQUIRE at offset
        10**12 built a 10**12-bit int: MemoryError in the markers agent)."""
        top = max(self.base + self.mask.bit_length(), start + mask.bit_length())
        base = max(self.base, top - MAX_HANDED_BITS)
        m = self.mask >> (base - self.base)
        m |= mask << (start - base) if start >= base else mask >> (base - start)
        return HandedOut(base, m)

    def advance(self, floor: int) -> "HandedOut":
        """A FLOOR: nothing below ``floor`` is read again, so its bits go."""
        if floor <= self.base:
            return self  # a lower floor: what lies between is unknown (waiting)
        return HandedOut(floor, self.mask >> (floor - self.base))

    def handed(self, offset: int) -> bool:
        return offset >= self.base and bool((self.mask >> (offset - self.base)) & 1)

    def offsets(self) -> list[int]:
        """Every offset handed out, lowest first (tests, views)."""
        out, m, i = [], self.mask, 0
        while m:
            low = (m & -m).bit_length() - 1
            i += low
            out.append(self.base + i)
            m >>= low + 1
            i += 1
        return out

    @property
    def end(self) -> int:
        """One past the highest offset handed out (``base`` if none)."""
        return self.base + self.mask.bit_length()


def status(handed: HandedOut, pending: set[int] | frozenset[int], offset: int) -> str:
    """What a successor does with record ``offset``: see the module docstring.
    ``pending`` holds the offsets the tracker's table has in flight."""
    if not handed.handed(offset):
        return WAITING
    return IN_FLIGHT if offset in pending else SETTLED

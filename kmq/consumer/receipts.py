"""Which delivery a shared consumer's CREDIT may say it has received (pure bookkeeping).

A CREDIT says "as of having received delivery ``seq`` of dispatcher ``epoch``, I can
take ``free`` more", and the dispatcher stops counting deliveries up to ``seq`` against
the consumer (``kmq.protocol.dispatch.Roster.credit``). So ``seq`` must name a delivery
whose messages already count in the consumer's ``in_flight``, from which ``free`` is
computed: not the last header read from the lane (its copies may still be arriving, a
reference's range still being read from the queue topic), but the last delivery read
before the first one not yet held. Claiming the header let a consumer with
``max_in_flight=500`` hold 527 messages (a credit sent while a reference was read).

Not thread-safe: the consumer calls it with its lock held.
"""

from __future__ import annotations

from collections import deque

Receipt = tuple[int, int]  # (epoch, seq) of a delivery


class Receipts:
    """Deliveries read from the lane, and which of them are held (counted) yet."""

    __slots__ = ("read", "_unheld")

    def __init__(self) -> None:
        self.read: Receipt = (0, 0)  # the last delivery header read
        # Read but not yet held, in read order, each with the receipt read just before it.
        self._unheld: deque[tuple[Receipt, Receipt]] = deque()

    def header(self, epoch: int, seq: int) -> None:
        """A delivery's header was read; its messages are not held yet.

        Within one epoch the receipt never goes back: a header read late (from the lane
        being left) or forged with an older seq set it back, and the dispatcher went on
        counting every later delivery against the consumer, which then got nothing (an
        audit: 0 of 160 in 150 s)."""
        before = self.read
        self._unheld.append(((epoch, seq), before))
        if epoch != before[0] or seq > before[1]:
            self.read = (epoch, seq)

    def held(self, epoch: int, seq: int) -> None:
        """That delivery's messages are held (or were given back, or were none): counted."""
        for i, (receipt, _before) in enumerate(self._unheld):
            if receipt == (epoch, seq):
                del self._unheld[i]
                return

    def claim(self) -> Receipt:
        """What a CREDIT may say was received: every delivery up to it is counted."""
        return self._unheld[0][1] if self._unheld else self.read

    def pending(self) -> int:
        """Deliveries read whose messages are not held yet."""
        return len(self._unheld)

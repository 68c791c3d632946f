"""The lanes of one shared consumer: the one it asks on, and one it is leaving.

A consumer reads its lane (kmq.consumer.lane_reader) and, when the lane brings it mostly
other consumers' records (kmq.consumer.lane_choice), moves: it takes the quietest of a
few lanes it never read, names it in its next CREDIT, and reads the old lane too until the
dispatcher's FAREWELL there, written after every delivery the dispatcher sent on it
(agents/dispatch/dispatcher.py, ``_credit``). Both lanes are read meanwhile, so a delivery
is never held back by a FAREWELL that does not come (a dispatcher that first heard of the
consumer with its new lane writes none; nor does an older tracker): the old lane is read
for :data:`MOVE_WAIT_S` then, and what came on it after that comes back after its
visibility timeout. Deliveries of the two lanes may interleave: a CREDIT then claims at
worst one delivery too many, and what is beyond the consumer's room is given back
uncounted (kmq.consumer.shared_source).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kmq.consumer.lane_choice import SAMPLE_S, LaneWatch, candidates, pick_lane, quietest
from kmq.consumer.lane_reader import Got, LaneReader
from kmq.protocol import deliveries as D
from kmq.protocol.lane_layout import LaneLayout

log = logging.getLogger("kmq.consumer")

MOVE_WAIT_S = 5.0  # a lane left is read until its FAREWELL, or this long (a tracker without moves)
MOVE_POLL_S = 0.05  # while a lane is left, the new one is polled this long at most (then the old one again)


class ConsumerLanes:
    """Reads a consumer's lane, or first the one it is leaving; decides when to move."""

    def __init__(self, open_lane: Callable[[int], LaneReader], layout: LaneLayout, queue: str,
                 lock: threading.Lock) -> None:
        self._open = open_lane
        self._layout = layout
        self._queue = queue
        self._lock = lock  # the consumer's: its flusher reads the lane for CREDITs
        self.current = open_lane(pick_lane(layout.count) or 0)
        self.leaving: LaneReader | None = None
        self._read = {self.current.lane}  # never back to one: see _consider_moving
        self._left_at_s = 0.0
        self._watch = LaneWatch(time.monotonic())
        self._looked: tuple[float, dict[int, int]] | None = None  # (when, candidate lanes' ends)
        self._closed_bytes = (0, 0)  # (own, others') bytes read on lanes left
        self._closed_malformed = 0  # forged or undecodable delivery headers on lanes left
        self._closed_skipped = 0  # batches of lanes left that no client could read
        self.unsaid = False  # a move's new lane is not in a CREDIT yet (lock held)
        self.moves = 0

    @property
    def lane(self) -> int:
        """The lane the consumer asks for deliveries on."""
        return self.current.lane

    def bytes_read(self) -> tuple[int, int]:
        """Key + value bytes read on every lane so far: (this consumer's, the others')."""
        own, other = self._closed_bytes
        for r in self._readers():
            own, other = own + r.own_bytes, other + r.other_bytes
        return own, other

    def malformed(self) -> int:
        """Records keyed as this consumer's delivery headers that were not one, on every lane
        read (kmq.consumer.lane_reader): forged, or another client's."""
        return self._closed_malformed + sum(r.malformed for r in self._readers())

    def skipped_batches(self) -> int:
        """Record batches skipped on every lane read, no client being able to read them
        (kmq.kafka.batch_skips): a compression bomb, a corrupt batch."""
        return self._closed_skipped + sum(r.skips.batches for r in self._readers())

    def _readers(self) -> list[LaneReader]:
        """The lane readers open now: the current one and the one being left, if any."""
        return [r for r in (self.current, self.leaving) if r is not None]

    def settled(self) -> bool:
        """No lane being left, no delivery's copies on their way."""
        return self.leaving is None and not self.current.assembling()

    def read(self, timeout_s: float, may_move: bool) -> tuple[list[Got | D.Farewell], object]:
        """What came, in lane order per lane (a FAREWELL here answers a goodbye; the one that
        ends a move is taken here), and a fatal error a lane reader saw, if any.

        While a lane is being left both are read: the old one without waiting, the new one
        for at most MOVE_POLL_S at a time. Reading the new one only after the FAREWELL held
        deliveries back whenever none came (a dispatcher that first heard of this consumer
        with the new lane): a CI chaos run got a delivery 5 s late, past its visibility
        timeout, after its redelivery had been acked."""
        old = self.leaving
        out: list[Got | D.Farewell] = []
        fatal = None
        if old is not None:
            for got in old.read(0.0):
                if isinstance(got, D.Farewell):
                    self.leaving = None  # nothing more comes on it
                else:
                    out.append(got)
            fatal = old.fatal
            if self.leaving is not None and time.monotonic() - self._left_at_s >= MOVE_WAIT_S:
                log.info("queue %s: no FAREWELL on lane %d within %g s: reading lane %d only", self._queue,
                         old.lane, MOVE_WAIT_S, self.lane)
                self.leaving = None
            if self.leaving is None:
                self._closed_bytes = (self._closed_bytes[0] + old.own_bytes, self._closed_bytes[1] + old.other_bytes)
                self._closed_malformed += old.malformed
                self._closed_skipped += old.skips.batches
                old.close()
            timeout_s = 0.0 if out else min(timeout_s, MOVE_POLL_S)
        reader = self.current
        out += reader.read(timeout_s)
        if old is None and may_move:
            self._consider_moving(reader)
        return out, fatal or reader.fatal

    def _consider_moving(self, reader: LaneReader) -> None:
        """Judge the lane; to leave it, look at a few lanes' ends twice, SAMPLE_S apart
        (between two reads: nothing waits for it), and take the one that grew least. Never
        back to a lane read before: its end, if undercounted (docs/embedded-broker.md), would hand this
        consumer its own old deliveries again; with every lane read, it stays."""
        now = time.monotonic()
        if self._looked is None:
            if self._watch.judge(now, reader.own_bytes, reader.other_bytes):
                lanes = candidates(self._layout.count, self._read)
                if lanes:
                    self._looked = (now, reader.ends(self._layout, lanes))
                else:
                    self._watch.moved(now)  # judged again only after a longer while
            return
        at, before = self._looked
        if now - at >= SAMPLE_S:
            self._looked = None
            lane = quietest(before, reader.ends(self._layout, list(before)))
            if lane is None:
                self._watch.moved(now)
            else:
                self._move(reader, lane)

    def _move(self, old: LaneReader, lane: int) -> None:
        self._read.add(lane)
        new = self._open(lane)
        log.info("queue %s: lane %d brought %d bytes for other consumers against %d for us: moving to lane %d",
                 self._queue, old.lane, old.other_bytes, old.own_bytes, lane)
        with self._lock:
            self.current, self.leaving = new, old
            self.unsaid = True
            self._left_at_s = time.monotonic()
            self._watch.moved(self._left_at_s)
            self.moves += 1

    def close(self) -> None:
        for reader in (self.current, self.leaving):
            if reader is not None:
                reader.close()

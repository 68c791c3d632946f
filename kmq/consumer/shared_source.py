"""Where a ``dispatch="shared"`` queue's messages come from: the tracker's dispatcher.

Any number of consumers share a shared queue; none joins a group. Each consumer

1. picks a *lane* (a partition of a deliveries topic, kmq.protocol.lane_layout) at random
   and reads it from its end, keeping only records keyed with its own id
   (kmq.consumer.lane_reader); a lane that brings it mostly other consumers' records it
   leaves for another (kmq.consumer.lanes: its next CREDIT names the new lane, and it reads
   the old one too until the dispatcher's FAREWELL there says nothing more comes);
2. asks for work with CREDIT markers on the queue's markers partition: how many more
   messages it can take (its free ``max_in_flight``), as of the last delivery it
   received; it asks again whenever that grows and at least every heartbeat (its
   lease: a consumer that stops asking is handed nothing more within half its visibility
   timeout, and dropped by the dispatcher within ``LEASE_MS``; kmq.protocol.liveness,
   kmq.consumer.credits);
3. receives deliveries (kmq.protocol.deliveries): a header naming the ACQUIREd range, then
   copies of the records, or, where the queue dominates the range, nothing more: it reads
   the range from the queue topic itself (a reference); either way the records are held
   like a fetched range, and verbs settle them as in partition mode (the same markers on
   the same partition).

It asks only for a small read-ahead beyond what user code holds (``prefetch``), so the
consumers that start first do not take a backlog away from the ones that start a moment
later. Unless ``prefetch`` is given, the read-ahead starts at ``PREFETCH_START`` and
grows (``kmq.consumer.read_ahead``: up to eightfold, up to what user code settles in half a
second, up to ``max_in_flight``) each time user code emptied it after receiving all it
asked for: fast consumers soon ask for thousands, slow ones keep a few.

A consumer never holds more than it asked for: a delivery beyond its free room (possible
for a moment after a tracker failover) is given back at once, uncounted.

What reaches the lane while user code is busy (it asked ahead; it receives when done) is
read by the flusher thread (:meth:`SharedSource.read_in_background`) and held like the
rest of the read-ahead, so the keepalive keeps it invisible: left on the lane, it timed
out unread and came back with its delivery count spent (a docs audit found a worker's
retried message dead-lettered for ``max-deliveries`` while its copies were all handled).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from kmq.errors import DeliveryError
from kmq.consumer.credits import CreditAsking
from kmq.consumer.deliveries_held import DeliveriesHeld
from kmq.consumer.lane_reader import Got, LaneReader
from kmq.consumer.lanes import ConsumerLanes
from kmq.consumer.receipts import Receipts
from kmq.consumer import read_ahead
from kmq.consumer.reference_reader import ReferenceReader
from kmq.protocol import deliveries as D
from kmq.protocol.lane_layout import LaneLayout

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer

log = logging.getLogger("kmq.consumer")

# The flusher reads the lane when the receiving thread has not for this long (user code busy).
BACKGROUND_READ_AFTER_S = 0.25



class SharedSource(CreditAsking, DeliveriesHeld):
    """Receives a shared queue's deliveries on one lane and asks for them with CREDITs."""

    mode = "shared"

    def __init__(self, consumer: "Consumer", lanes: LaneLayout, config: dict[str, Any] | None = None,
                 prefetch: int | None = None) -> None:
        c = self._c = consumer
        self._fixed_prefetch = prefetch is not None
        self.prefetch = prefetch if prefetch is not None else min(read_ahead.PREFETCH_START, c.max_in_flight)
        self._received_since_grow = 0
        self._grown_at = time.monotonic()  # when the read-ahead last changed
        self._waited_s = 0.0  # since then, how long user code waited for deliveries
        self._wait_began: float | None = None  # user code found nothing ready then
        s = c._settings
        self.consumer_id = uuid.uuid4().hex
        self._key_of_queue = c.queue.encode()
        self._layout = lanes
        self._config = config
        self._receipts = Receipts()  # what a CREDIT may say was received (lock held)
        self._last_free = -1
        self._said_away = False
        self._freed = 0  # messages settled since the last CREDIT
        self._last_credit_s = 0.0
        # Ranges delivered by reference, read from the queue topic.
        self.refs = ReferenceReader(s, f"{s.group_id(c.queue)}.refs", config, lambda: c.visibility_timeout_s)
        self._leaving = False
        self._farewell: D.Farewell | None = None
        # One thread at a time reads the lane and the references: the receiving thread, or
        # the flusher while user code is busy (a librdkafka consumer takes one thread at once).
        self._reading = threading.Lock()
        self._read_at = time.monotonic()  # when a read last ended
        self.lanes = ConsumerLanes(self._lane_reader, lanes, c.queue, c._lock)
        c._log.wake_at = self._refill_at()
        c._log.wake.set()  # the flusher asks for work at once, not after its first idle wait

    def _lane_reader(self, lane: int) -> LaneReader:
        s, c = self._c._settings, self._c
        return LaneReader(s, f"{s.group_id(c.queue)}.lanes", self._config, self._layout, lane,
                          self.consumer_id, c.queue)

    @property
    def lane(self) -> int:
        """The lane this consumer asks for deliveries on."""
        return self.lanes.lane

    @property
    def lane_moves(self) -> int:
        return self.lanes.moves

    def lane_bytes(self) -> tuple[int, int]:
        """Key + value bytes read on every lane so far: (this consumer's, the others')."""
        return self.lanes.bytes_read()

    # -- receiving (the receiving thread) ---------------------------------------------

    def fetch(self, room: int, timeout_s: float) -> int:
        """Read the lane (and referred ranges); hold complete deliveries. Returns how many."""
        with self._reading:
            return self._read(timeout_s, may_move=True)

    def _read(self, timeout_s: float, may_move: bool) -> int:
        """Read the lane, then referred ranges (``_reading`` held); returns how many were held."""
        try:
            fresh = self._read_lanes(0.0 if self.refs else timeout_s, may_move)
            if self.refs:
                for d, got, sent_at in self.refs.read(timeout_s):
                    fresh += self._hold_ref(d, got, sent_at)
            else:
                self.refs.rest_if_idle()
            return fresh
        finally:
            self._read_at = time.monotonic()
            # What anyone who may write the lanes or the queue topic could forge, counted.
            self._c.stats["lane-malformed"] = self.lanes.malformed()
            self._c.stats["lane-batches-skipped"] = self.lanes.skipped_batches()
            self._c.stats["references-incomplete"] = self.refs.incomplete

    def read_in_background(self) -> None:
        """On the flusher thread, the consumer's lock not held: take in what reached the lane
        (and the references' records) if user code has not read for a while, without waiting."""
        if self._leaving or time.monotonic() - self._read_at < BACKGROUND_READ_AFTER_S:
            return
        if not self._reading.acquire(blocking=False):
            return  # the receiving thread is reading
        try:
            if self._leaving:  # looked at again under the lock: a leave() closes the readers next
                return
            fresh = self._read(0.0, may_move=False)  # a move is the receiving thread's to make
            if fresh:
                with self._c._lock:
                    self._c.stats["received"] += fresh
                    # Extended now, not at the next round: its deadline began at the dispatch,
                    # and a 1 s visibility timeout ran out before the round's EXTEND arrived.
                    self._c._keepalive()
        finally:
            self._reading.release()

    def _read_lanes(self, timeout_s: float, may_move: bool) -> int:
        c = self._c
        moves = self.lanes.moves
        got, fatal = self.lanes.read(timeout_s, may_move=may_move and not self._leaving)
        fresh = 0
        for g in got:
            if isinstance(g, D.Farewell):
                self._farewell = g
            else:
                fresh += self._take(g)
        if fatal is not None:
            c._set_error(DeliveryError(f"consumer of queue {c.queue!r} failed: {fatal}"))
        if self.lanes.moves != moves:
            c._log.wake.set()  # the flusher names the new lane at once
        return fresh

    def _take(self, got: Got) -> int:
        """A delivery read from a lane: a reference waits for its range, copies are held."""
        d = got.delivery
        # Its deadline runs from its dispatch: counted from now, a delivery that waited out a
        # stall on the lane looked fresh (kmq.consumer.lane_age, kmq.consumer.stale).
        sent_at = time.monotonic() - got.age_s
        with self._c._lock:  # a CREDIT claims it only once its messages are held
            self._receipts.header(d.epoch, d.seq)
        if got.copies is None:
            self.refs.add(d, sent_at)
            return 0
        return self._hold(d, got.copies, sent_at)

    def on_empty(self) -> None:
        """User code found nothing ready: read further ahead if it took all we asked for."""
        now = time.monotonic()
        if not self._fixed_prefetch and self._received_since_grow >= self.prefetch:
            busy_s = now - self._grown_at - self._waited_s  # user code's own time
            self.prefetch = read_ahead.grown(self.prefetch, self._received_since_grow, busy_s,
                                             self._c.max_in_flight)
            self._received_since_grow = 0
            self._grown_at, self._waited_s = now, 0.0
            self._c._log.wake_at = self._refill_at()
        if self._wait_began is None:
            self._wait_began = now

    def _received(self, n: int) -> None:
        """Deliveries held for user code: its wait for them, if it waited, is over."""
        self._received_since_grow += n
        if self._wait_began is not None:
            self._waited_s += time.monotonic() - self._wait_began
            self._wait_began = None

    # -- the rest of the source interface -------------------------------------------------

    def on_receiving_thread(self) -> None:
        pass

    def flush(self) -> None:
        with self._c._lock:
            self._commit_transaction()

    def config_changed(self) -> None:
        pass

    assignment = frozenset()
    group_share = frozenset()

    def leave(self, timeout_s: float) -> None:
        """Say goodbye (a CREDIT with no lease) and take in what was already on its way.

        The dispatcher answers with a FAREWELL naming its last delivery to us; everything
        up to it is held here, so the caller gives it back at once (uncounted) instead of
        leaving it to the visibility timeout. Without an answer within ``timeout_s`` (no
        tracker), what was on its way comes back after its visibility timeout.
        """
        c = self._c
        self._leaving = True
        with c._lock:
            c._writer.send_soft(self.credit(time.monotonic(), force=True))
            self._commit_transaction()
        c._writer.flush(timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            f = self._farewell
            if (f is not None and self.lanes.settled() and not self.refs
                    and (f.seq == 0 or self._receipts.read[1] >= f.seq)):
                return
            self.fetch(0, min(0.1, max(0.0, deadline - time.monotonic())))
        log.info("queue %s: no farewell from the dispatcher within %g s", c.queue, timeout_s)

    def close(self) -> None:
        """Stop reading the lane (after :meth:`leave`)."""
        for reader in (self.lanes, self.refs):
            try:
                reader.close()
            except Exception:  # pragma: no cover - closing twice
                pass

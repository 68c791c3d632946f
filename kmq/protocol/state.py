"""The tracker's decisions: a pure state machine per markers partition.

Time is always an argument (``now_ms``); nothing here reads a clock, talks to
Kafka or knows about Faust. State lives behind :class:`~kmq.protocol.store.Store`,
a narrow seam over two ordered key-value maps (entries, deadline index); the
tracker backs it with changelogged RocksDB tables, tests with
:class:`~kmq.protocol.store.MemoryStore`.

The flow (numbers match the README):

4. ``apply(marker, now_ms)`` folds a consumer's marker into the in-flight
   range entries: START opens an entry with ``deadline = now + timeout``,
   ACK clears offsets, EXTEND/RELEASE/REJECT give offsets their own deadline
   and cause; SCHEDULE holds a delayed send.
5. ``due(now_ms)`` lists what has come due, in deadline order, reading only;
   the tracker republishes or dead-letters it, and only then calls
   ``settle(...)`` so a crash in between repeats the work instead of losing it
   (:mod:`kmq.protocol.deadlines`, mixed in).
"""

from __future__ import annotations

from kmq.protocol import entries as E
from kmq.protocol.entries import Cause, Group, InFlight, Scheduled
from kmq.protocol.markers import (Ack, Acquire, Begin, Credit, Extend, Floor, Marker, Purge, RangeRef, Reject, Release,
                                  Schedule, Start, Tick, violation)
from kmq.protocol.limits import MAX_RECORD_WORK_BYTES
from kmq.protocol.outcomes import Outcome
from kmq.protocol.attempts import Attempts
from kmq.protocol.deadlines import Deadlines
from kmq.protocol.dispatch_view import DispatchView
# The values it reports live in kmq.protocol.due; importable from here as before.
from kmq.protocol.due import Applied, Due, DueSend, Expiry, StaleIndexKey  # noqa: F401
from kmq.protocol.handed import HandedOut
from kmq.protocol.store import Store


# Offsets a consumer may still release or reject: not rejected, not already
# waiting out a backoff (the tracker owns those).
GIVEABLE = (Cause.TIMEOUT, Cause.RELEASED, Cause.RETURNED, Cause.RELEASED_BACKOFF)


def replay_safe(markers: list[Marker] | tuple[Marker, ...]) -> bool:
    """Whether a record of only these markers changes nothing when it is applied again:
    ACKs (an ACK clears offsets; cleared ones stay clear, and a range taken back or settled
    is not held, so the ACK is ``late``) and CREDITs (not state). The markers agent records
    in the table that it holds a record's changes only for other records (a START applied
    again would bring back offsets since acked; an EXTEND or RELEASE would move deadlines)."""
    return all(isinstance(m, (Ack, Credit)) for m in markers)


class PartitionState(DispatchView, Attempts, Deadlines):
    """In-flight ranges and scheduled sends of one markers partition."""

    def __init__(self, store: Store, markers_partition: int = 0,
                 work_budget_bytes: int = MAX_RECORD_WORK_BYTES) -> None:
        self.store = store
        self.markers_partition = markers_partition
        # Bytes of entries read and written (keys and values): one marker record may
        # cost at most the budget (plus the one marker that crosses it), one due() too.
        self.work_bytes = 0
        self.work_budget_bytes = work_budget_bytes

    def begin_record(self) -> None:
        """Start the work budget of the next marker record."""
        self.work_bytes = 0

    def _get(self, key: bytes) -> bytes | None:
        raw = self.store.get(key)
        self.work_bytes += len(key) + (len(raw) if raw else 0)
        return raw

    def _put(self, key: bytes, value: bytes) -> None:
        self.work_bytes += len(key) + len(value)
        self.store.put(key, value)

    # -- 4. markers in ------------------------------------------------------

    def apply(self, marker: Marker, now_ms: int) -> Applied | None:
        """Fold one consumer marker into the state (TICKs are handled by due/settle).

        Never raises for a marker outside the codec's limits (one built in-process
        skips the decoder): it is refused as ``MALFORMED_MARKER``, changing nothing.
        """
        why = violation(marker)
        if why is None and self.work_bytes > self.work_budget_bytes:
            why = (f"its record's markers already read and wrote {self.work_bytes} bytes of entries "
                   f"(MAX_RECORD_WORK_BYTES={self.work_budget_bytes})")
        if why is not None:
            return Applied("", Outcome.MALFORMED_MARKER, 1, why)
        if isinstance(marker, Start):
            return self._start(marker, now_ms)
        if isinstance(marker, Acquire):
            if marker.epoch != self.epoch():
                return Applied(marker.range.queue, Outcome.FENCED, marker.mask.bit_count())
            if marker.ordered:  # a successor must know these went out (kmq.protocol.handed)
                r = marker.range
                h = self.handed_out(r.queue, r.partition) or HandedOut(r.start)
                self._put(E.handed_key(r.queue, r.partition), E.encode_handed(h.mark(r.start, marker.mask)))
            return self._start(Start(marker.range, marker.timeout_ms, marker.mask), now_ms)
        if isinstance(marker, Begin):
            self._put(E.epoch_key(self.markers_partition), E.encode_epoch(marker.epoch))
            return None
        if isinstance(marker, Floor):
            if marker.epoch != self.epoch():
                return Applied(marker.queue, Outcome.FENCED, 0)
            # An ordered queue's cursor goes back to its oldest record not handed out
            # (docs/ordering.md): a successor must read its held-back records again; an
            # unordered queue's goes past duplicates dropped after its last ACQUIRE.
            self._put(E.cursor_key(marker.queue, marker.partition), E.encode_offset(marker.offset))
            h = self.handed_out(marker.queue, marker.partition)
            if h is not None and marker.offset > h.base:  # nothing below the floor is read again
                self._put(E.handed_key(marker.queue, marker.partition), E.encode_handed(h.advance(marker.offset)))
            return None
        if isinstance(marker, Schedule):
            return self._schedule(marker)
        if isinstance(marker, (Tick, Credit)):  # a CREDIT is the dispatcher's, not state
            return None
        if isinstance(marker, Purge):
            return self._purge(marker.queue)
        key = E.range_key(marker.range)
        raw = self._get(key)
        if raw is None:
            return Applied(marker.range.queue, self._not_held(marker.range), marker.mask.bit_count())
        entry = E.decode_inflight(raw)
        if isinstance(marker, Ack):
            what, touched = Outcome.ACKED, entry.remove(marker.mask)
        elif isinstance(marker, Extend):
            # Only offsets still waiting on a consumer can be extended; released
            # or rejected ones are no longer the consumer's.
            what, touched = Outcome.EXTENDED, entry.move(
                marker.mask, now_ms + marker.timeout_ms, Cause.TIMEOUT, from_causes=(Cause.TIMEOUT,))
        elif isinstance(marker, Release):
            if not marker.counted:
                cause, what = Cause.RETURNED, Outcome.RETURNED
            elif marker.delay_ms < 0:  # no delay given: the queue's backoff policy decides
                cause, what = Cause.RELEASED_BACKOFF, Outcome.RELEASED
            else:
                cause, what = Cause.RELEASED, Outcome.RELEASED
            touched = entry.move(marker.mask, now_ms + max(0, marker.delay_ms), cause,
                                 from_causes=GIVEABLE)
        elif isinstance(marker, Reject):
            what, touched = Outcome.REJECTED, entry.move(
                marker.mask, now_ms, Cause.REJECTED, marker.reason, from_causes=GIVEABLE)
        else:  # pragma: no cover - exhaustive over Marker
            raise TypeError(f"not a marker: {marker!r}")
        self._store_range(key, entry)
        return Applied(marker.range.queue, what, touched.bit_count(),
                       settled=touched if what == Outcome.ACKED else 0)

    def _not_held(self, r: RangeRef) -> Outcome:
        """Why a marker's range is not held: LATE if it was handed out (the queue partition's
        cursor is at or past its end), else UNKNOWN_RANGE (never started: set aside)."""
        raw = self._get(E.cursor_key(r.queue, r.partition))
        if raw is not None and E.decode_offset(raw) >= r.end:
            return Outcome.LATE
        # An ordered queue's FLOOR sets its cursor back to its oldest waiting record; what
        # it handed out above that is in the handed-out bitmap, whose end never goes down.
        h = self.handed_out(r.queue, r.partition)
        return Outcome.LATE if h is not None and h.end >= r.end else Outcome.UNKNOWN_RANGE

    def _start(self, m: Start, now_ms: int) -> Applied:
        key = E.range_key(m.range)
        old = self._get(key)
        entry = InFlight(started_ms=now_ms, timeout_ms=m.timeout_ms,
                         groups=[Group(now_ms + m.timeout_ms, Cause.TIMEOUT, "", m.mask)])
        if old is not None:
            # The same range fetched again (a replayed marker or a re-fetch after
            # a consumer died before committing): it is a fresh delivery.
            entry.indexed_ms = E.decode_inflight(old).indexed_ms
        self._store_range(key, entry, reindex=True)
        self._advance_cursor(m.range)
        return Applied(m.range.queue, Outcome.STARTED, m.mask.bit_count())

    def note_handed_out(self, r: RangeRef) -> None:
        """``r`` was handed out though nothing of it is tracked (a purge dropped every offset):
        a settle of it is then LATE, as for any range handed out and no longer held."""
        self._advance_cursor(r)

    def _advance_cursor(self, r: RangeRef) -> None:
        """Remember that the queue's records below ``r.end`` on its partition were fetched."""
        key = E.cursor_key(r.queue, r.partition)
        raw = self._get(key)
        if raw is None or E.decode_offset(raw) < r.end:
            self._put(key, E.encode_offset(r.end))

    def _schedule(self, m: Schedule) -> Applied:
        key = E.schedule_key(m.queue, m.message_id)
        if self._get(key) is not None:
            # A duplicate delayed send (producer retry, replay): keep the first.
            return Applied(m.queue, Outcome.SCHEDULED_DUPLICATE, 1)
        self.store.index_put(E.index_key(m.due_ms, key))  # index first: see Store
        self._put(key, E.encode_scheduled(Scheduled(m.due_ms, m.value, m.headers, m.due_ms)))
        return Applied(m.queue, Outcome.SCHEDULED, 1)

    def _purge(self, queue: str) -> Applied:
        dropped = 0
        for prefix in E.queue_prefixes(queue):
            for key in list(self.store.scan_prefix(prefix)):
                raw = self._get(key)
                if raw is None:
                    continue
                if E.is_range_key(key):
                    entry = E.decode_inflight(raw)
                    dropped += entry.pending.bit_count()
                    indexed = entry.indexed_ms
                else:
                    dropped += 1
                    indexed = E.decode_scheduled(raw).indexed_ms
                self.store.delete(key)  # entry first, then its index key: see Store
                if indexed != E.NOT_INDEXED:
                    self.store.index_delete(E.index_key(indexed, key))
        return Applied(queue, Outcome.PURGED, dropped)

    def _store_range(self, key: bytes, entry: InFlight, reindex: bool = False) -> None:
        """Write ``entry`` and its index key in crash-safe order (see :class:`Store`)."""
        old = entry.indexed_ms
        nxt = entry.next_deadline_ms()
        if nxt is None:
            self.store.delete(key)
        else:
            if nxt != old or reindex:
                self.store.index_put(E.index_key(nxt, key))
                entry.indexed_ms = nxt
            self._put(key, E.encode_inflight(entry))
        if old != E.NOT_INDEXED and old != nxt:
            self.store.index_delete(E.index_key(old, key))

"""How a shared queue's consumer asks for work: its CREDIT markers (kmq.consumer.shared_source).

A CREDIT says how many more messages the consumer can take (its free ``max_in_flight``,
capped by its read-ahead) as of the last delivery it received, and renews its lease. It
goes out when half the read-ahead was settled (so a delivery carries many messages, not
one), when user code has nothing left and some room was freed, at least every heartbeat
(a second, or a quarter of a visibility timeout under 4 s: kmq.protocol.liveness), or when
leaving (no lease). While user code is away (holding a message past its last extension,
and neither receiving nor settling since: kmq.consumer.user_code) it says nothing is free,
and says so, and that it is back, at once. Mixed into
:class:`~kmq.consumer.shared_source.SharedSource`; called by the flusher thread with the
consumer's lock held.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kmq.consumer.lanes import ConsumerLanes
from kmq.consumer.marker_writer import RetryTransaction
from kmq.consumer.receipts import Receipts
from kmq.protocol import markers as M
from kmq.protocol.liveness import LEASE_MS, heartbeat_s

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer


class CreditAsking:
    """The CREDITs of a shared source (see the module docstring)."""

    _c: "Consumer"
    consumer_id: str
    lane: int          # the lane it asks on (SharedSource's property)
    prefetch: int
    lanes: ConsumerLanes
    _receipts: Receipts
    _leaving: bool
    _freed: int        # messages settled since the last CREDIT
    _last_free: int    # what the last CREDIT said was free (-1: none sent yet)
    _last_credit_s: float
    _said_away: bool   # whether the last CREDIT said user code is away (nothing free)

    def credit(self, now_s: float, force: bool = False) -> list[M.Marker]:
        """A CREDIT marker when it is worth one: half the read-ahead was settled (so a
        delivery carries many messages, not one), or user code has nothing left and some
        room was freed, or the lease needs renewing, or ``force``."""
        c = self._c
        # A copy (taken whole, the GIL held): the receiving thread pops from _ready without
        # the lock, and iterating it here raised "deque mutated during iteration" into user
        # code (a CI run of tests/chaos/test_sdk_memory.py).
        unhanded = sum(len(h.recs) - h.handed for h in tuple(c._ready)
                       if c._gate is None or not _behind_its_head(h))
        away = c._user_code_away  # kmq.consumer.user_code: ask for nothing it cannot hand out
        free = 0 if self._leaving or away else max(0, min(c.max_in_flight - c._in_flight,
                                                          self.prefetch - unhanded, M.MAX_CREDIT))
        due = (now_s - self._last_credit_s >= heartbeat_s(c._timeout_ms) or self.lanes.unsaid
               or away != self._said_away)
        self.lanes.unsaid = False
        refill = self._freed >= self._refill_at() or (self._freed and unhanded == 0)
        if not (force or due or (refill and free) or (self._last_free < 0 and free)):
            return []
        self._freed = 0
        self._last_free = free
        self._last_credit_s = now_s
        self._said_away = away
        epoch, seq = self._receipts.claim()
        return [M.Credit(c.queue, self.consumer_id, self.lane, epoch, seq, free,
                         0 if self._leaving else LEASE_MS, c._timeout_ms)]

    def starving(self) -> bool:
        """Settlements should go out now: user code has nothing left to take, or enough was
        settled to ask for a refill (half the read-ahead)."""
        if self._leaving:
            return False
        c = self._c
        return not c._ready or self._freed + len(c._log.acks) >= self._refill_at()

    def _refill_at(self) -> int:
        return max(1, self.prefetch // 2)

    def on_settled(self, n: int) -> None:
        """``n`` held messages were settled (or lapsed): room for as many more."""
        self._freed += n

    def flusher_work(self) -> None:
        c = self._c
        c._writer.send_soft(self.credit(time.monotonic()))
        self._commit_transaction()

    def _commit_transaction(self) -> None:
        """Transactional writers gather markers; here they carry no offsets (lock held)."""
        writer = self._c._writer
        if writer.transactional and writer.has_pending:
            try:
                writer.commit(lambda: ([], nothing), None)
            except RetryTransaction:
                pass


def _behind_its_head(held) -> bool:
    """An ordered queue's run whose message before the next is still in user code: the rest
    waits for it, and is not read-ahead user code could take. Counted, a hot group's run
    filled the read-ahead and the consumer asked for nothing more while its user code held
    the head: no other group reached it (docs/ordering.md)."""
    i = held.handed
    return 0 < i < len(held.recs) and not held.state[held.rels[i - 1]] and held.rels[i - 1] not in held.lapsed


def nothing() -> None:
    """A marker write's confirmation nobody waits for."""

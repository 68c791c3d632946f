"""What a consumer holds: its fetched ranges, their messages' fates, and batches handed out.

A :class:`HeldRange` is the consumer-side twin of the tracker's in-flight
entry for one fetched range; settlements of its messages are recorded here
(one byte per offset) and sent as aggregated markers. A
:class:`MessageBatch` is what ``receive_batch`` returns: a list of messages
that can be acked as whole runs of a range at once.
"""

from __future__ import annotations

import time
from itertools import repeat
from typing import TYPE_CHECKING, Any

from kmq.protocol import markers as M
from kmq.message import ACKED, Message

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer
    from kmq.consumer.settlement import SettlementLog

ACKED_RUN = bytes([ACKED])
# A range's state bytes as binary digits: "1" where acked (int(..., 2) reads them in C).
_ACKED_DIGITS = bytes(0x31 if v == ACKED else 0x30 for v in range(256))


class HeldRange:
    """Consumer-side view of one fetched range: its messages and what became of them.

    ``recs[i]`` is the record at offset ``ref.start + rels[i]``. Records are
    handed out in order, so ``recs[:handed]`` reached user code; ``handouts``
    holds ``(upto, monotonic time)`` checkpoints of that progress. Message
    objects are built only at hand-out, and no log keeps them (an ack is a state
    byte), so they die with user code's reference: young, cheap for the GC.
    Rare per-message state (lapsed, explicit extends, parsed headers) lives
    here rather than on each Message.
    """

    __slots__ = ("ref", "consumer", "log", "acks", "recs", "rels", "state", "outstanding", "handed",
                 "handouts", "lapsed", "holds", "meta", "extended_at", "kept_at", "acks_sent",
                 "settled_sent")

    def __init__(self, ref: M.RangeRef, consumer: "Consumer", log: "SettlementLog",
                 arrived_at: float | None = None) -> None:
        self.ref = ref
        self.consumer = consumer  # the verbs' limits (max_delay_s, max_extend_s)
        self.log = log
        self.acks = log.acks  # Message.ack appends here directly: the hot path
        self.recs: list[Any] = []
        self.rels: range | list[int] = range(0)
        self.state = bytearray(ref.end - ref.start)  # settlement per offset (kmq.message)
        self.outstanding = 0
        self.handed = 0
        self.handouts: list[tuple[int, float]] = []
        self.lapsed: set[int] = set()
        self.holds: dict[int, float] = {}
        self.meta: dict[int, Any] = {}
        # When the tracker last heard to keep what is not handed out invisible (monotonic s):
        # its arrival (its dispatch, for a delivery: kmq.consumer.lane_age), then each
        # keepalive round's EXTEND of it once written (kmq.consumer.flusher; the stale
        # read-ahead check and the group gate's visibility estimate). Not while user code
        # is away: its read-ahead goes back (kmq.consumer.user_code).
        self.extended_at = time.monotonic() if arrived_at is None else arrived_at
        # ... and to keep any of it invisible: the process was alive (the keepalive's
        # check for a stall, which lapses what user code holds).
        self.kept_at = self.extended_at
        self.acks_sent = 0  # mask of the acks already turned into markers (take_acks)
        # Mask of the offsets already settled by a marker (the drain's): a verb of another
        # thread that raced it (an ack from a worker thread against close()'s give-back; the
        # verbs check and set a state byte without a lock) is left out, not counted twice.
        self.settled_sent = 0

    def hand_out(self, n: int) -> list[Message]:
        """The next ``n`` messages, recorded as handed out now."""
        i = self.handed
        j = min(i + n, len(self.recs))
        out = list(map(Message, zip(self.recs[i:j], repeat(self, j - i), self.rels[i:j])))
        self.handed = j
        now = time.monotonic()
        h = self.handouts
        if h and now - h[-1][1] < 0.001:
            h[-1] = (j, now)  # merge bursts; the later time, so an extension is never early
        else:
            h.append((j, now))
        return out

    def drop_unhanded(self, upto: int) -> int:
        """Messages ``handed:upto`` never reach user code and are no longer ours to settle or
        extend (a purge, a stall): they lapse. Returns how many (lock held)."""
        dropped = self.rels[self.handed:upto]
        self.lapsed.update(dropped)
        self.handed = upto
        self.outstanding -= len(dropped)
        return len(dropped)

    def take_acks(self) -> int:
        """The mask of offsets acked since the last call (the drain's, lock held).

        Read from the state bytes in one C-level pass, so an ack costs no Python step
        here; an ack recorded while this runs is in this mask or the next.
        """
        acked = int(self.state.translate(_ACKED_DIGITS)[::-1], 2)
        fresh = acked & ~self.acks_sent
        self.acks_sent = acked
        return fresh

    def handed_at(self) -> list[float]:
        """Monotonic hand-out time of ``recs[i]`` for each handed-out i."""
        out: list[float] = []
        prev = 0
        for upto, t in list(self.handouts):
            out.extend([t] * (upto - prev))
            prev = upto
        now = time.monotonic()
        out.extend([now] * (self.handed - prev))  # a hand-out not yet checkpointed
        return out


class MessageBatch(list):
    """Messages returned by :meth:`Consumer.receive_batch`.

    A plain list of :class:`Message`, plus :meth:`ack`, which acks every
    message of the batch not settled yet in O(1) per fetched range.
    """

    def __init__(self) -> None:
        super().__init__()
        self._runs: list[tuple[HeldRange, int, int]] = []  # (range, first index, end index)

    def ack(self) -> int:
        """Ack every message of this batch that is still held; returns how many."""
        done = 0
        for held, i, j in self._runs:
            rels = held.rels[i:j]
            if not rels:
                continue
            state = held.state
            lo, hi = rels[0], rels[-1] + 1
            if isinstance(rels, range) and state.count(0, lo, hi) == hi - lo:
                state[lo:hi] = ACKED_RUN * (hi - lo)
                held.log.add_run(held)
                done += hi - lo
                continue
            for k, rel in enumerate(rels):  # mixed: some were settled one by one
                if not state[rel]:
                    Message((held.recs[i + k], held, rel)).ack()
                    done += 1
        return done

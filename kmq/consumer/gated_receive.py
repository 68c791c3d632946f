"""Receiving from an ordered queue: the group gate applied at the front of the ready ranges.

A queue with ``ordering="group"`` may be handed *runs* (several consecutive messages of
one group in one delivery). User code still sees a group one message at a time: before
a grouped message at the front of the ready ranges is handed out, the pure
:mod:`kmq.consumer.group_gate` decides on the group's earlier messages' settlement
states (read lazily here, nothing added to the verbs): hand it out, wait (a short tick,
until the earlier one is settled or the timeout passes), or give it back uncounted
(``Verb.RETURN``, stat ``returned-unhandled``) when its run broke or its visibility is
nearly out. Only the receiving thread calls this; consumers of other queues never do
(``Consumer._gate`` is None for them).

:class:`GatedReceive` is mixed into :class:`kmq.consumer.facade.Consumer`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kmq.consumer import group_gate as G
from kmq.consumer.held import HeldRange, MessageBatch
from kmq.message import RELEASED, Message, Verb

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer

GATE_TICK_S = 0.02  # how often a receive held back by its group looks again (the flusher's tick)
LANE_READ_EVERY_S = 0.05  # how often the lane is read while there are ready messages (_fetch_waiting)


class GatedReceive:
    """``receive``/``receive_batch`` for a queue with ``ordering="group"``, and the worker's
    checks on the messages of a batch it runs one after another."""

    def _follow_ordering(self: "Consumer") -> None:
        """Gate the queue while its settings say ``ordering="group"`` (called on each change)."""
        if self._queue_config.ordering != "group":
            self._gate = None
        elif getattr(self, "_gate", None) is None:
            self._gate_on()

    def _gate_on(self: "Consumer") -> None:
        """Gate from now on (the settings say so, or a delivery came in runs); the gate last,
        as the receiving thread takes its presence as the sign."""
        self._only_group: dict = {}
        self._lane_read_at = 0.0
        self._gate = G.GroupGate()

    def _receive_gated(self: "Consumer", max_messages: int, timeout_s: float | None,
                       batch: MessageBatch | None) -> Message | None:
        """Up to ``max_messages`` messages the gate lets through (into ``batch`` when given,
        else the one message or None); waits only while nothing is taken yet."""
        me = self._wait_begins()
        try:
            return self._gated(max_messages, timeout_s, batch)
        finally:
            self._wait_ends(me)

    def _gated(self: "Consumer", max_messages: int, timeout_s: float | None,
               batch: MessageBatch | None) -> Message | None:
        gate = self._gate
        gate.new_batch()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        hold = self._holds_dead_letters()
        margin = G.margin_s(self.visibility_timeout_s)

        def fate_of(run: HeldRange, rel: int) -> str:
            return G.fate(run.state[rel], rel in run.lapsed, hold)

        ready, taken = self._ready, 0
        one: Message | None = None
        while taken < max_messages:
            if not ready:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if taken or not self._receive_into_buffer(left):
                    break
                continue
            if self._attention:
                self._on_receiving_thread()
                continue
            now = time.monotonic()
            if now - self._lane_read_at >= LANE_READ_EVERY_S:
                self._fetch_waiting(now)
            pick = None
            with self._lock:  # the flusher gives the read-ahead back when user code is away
                if self._closed and taken:
                    break  # what was taken before close() began is the caller's
                self._check_open()
                for held in ready:  # the first range whose next message need not wait
                    i = held.handed
                    msg = Message((held.recs[i], held, held.rels[i]))
                    group = msg.group_bytes
                    run = None if group is None else msg.run or held
                    left = G.remaining_s(now, extended_at=held.extended_at, visibility_s=self.visibility_timeout_s)
                    if group is None:  # not gated; but past its visibility it is the tracker's (kmq.consumer.stale)
                        verdict = G.HAND if left > 0 else G.GIVE_BACK
                    else:
                        verdict = gate.decide(group, run, left, margin, fate_of)
                    if verdict != G.WAIT:
                        pick = held
                        (m,) = held.hand_out(1)
                        if held.handed == len(held.recs):
                            ready.remove(held)
                        break
                    if not self._only_group_left(held, group):
                        break  # looking past it could hand another group's later message first
            if pick is None:
                self._check_open()
                self._raise_error()
                if taken or (deadline is not None and now >= deadline):
                    break
                # Read what was delivered meanwhile: held, it is kept alive by the keepalive;
                # left unread on the lane, it would time out while its group waits here.
                self._fetch_waiting(now)
                self._stop.wait(GATE_TICK_S if deadline is None else min(GATE_TICK_S, deadline - now))
                continue
            held = pick
            if verdict == G.GIVE_BACK:
                self._return_message(m)
                gate.given_back(group, held, m[2], run)
                continue
            if group is not None:
                gate.handed(group, held, m[2], run)
            taken += 1
            if batch is None:
                one = m
            else:
                runs = batch._runs
                if runs and runs[-1][0] is held and runs[-1][2] == i:
                    runs[-1] = (held, runs[-1][1], i + 1)
                else:
                    runs.append((held, i, i + 1))
                batch.append(m)
        gate.prune(lambda run: self._held.get(run.ref) is run)
        return one

    def _only_group_left(self: "Consumer", held: HeldRange, group: bytes | None) -> bool:
        """Whether every message of ``held`` not handed out yet is of ``group`` (a group's run:
        the dispatcher delivers each run of two or more on its own), so that the ranges
        behind it may be looked at while it waits. Remembered per range and position."""
        if group is None:
            return False
        cache = self._only_group
        key = (held, held.handed)
        got = cache.get(key)
        if got is None:
            got = all(Message((rec, held, rel)).group_bytes == group
                      for rec, rel in zip(held.recs[held.handed:], held.rels[held.handed:]))
            if len(cache) > 1024:
                cache.clear()
            cache[key] = got
        return got

    def _holds_dead_letters(self: "Consumer") -> bool:
        """Whether a rejected head holds its group: "hold", and only if it is dead-lettered
        (with dead_letter=False it is dropped: settled, the group goes on)."""
        cfg = self._queue_config
        return cfg.dead_letter_head == "hold" and cfg.dead_letter

    def _fetch_waiting(self: "Consumer", now: float) -> None:
        """Hold what the lane brought (the dispatcher sent it against this consumer's credit)
        while ready messages wait for their groups or a long run is handled: held, it is
        kept alive by the keepalive; left unread on the lane, it times out (measured: a
        run of one group handled for 4 s left a delivery unread past its visibility, and
        its message came again after its ack)."""
        self._lane_read_at = now
        got = self._source.fetch(self.batch_size, 0.0)
        with self._lock:  # the flusher counts what it reads in the background
            self.stats["received"] += got

    def _return_message(self: "Consumer", m: Message) -> bool:
        """Give ``m`` back uncounted (it never reached user code); False if it was settled
        or lapsed already."""
        held, rel = m[1], m[2]
        if held.state[rel] or rel in held.lapsed:
            return False
        held.state[rel] = RELEASED
        self._log.add(m, Verb.RETURN, 0)
        self.stats["returned-unhandled"] = self.stats.get("returned-unhandled", 0) + 1
        return True

    def admit_after(self: "Consumer", earlier: Message, m: Message) -> bool:
        """For runners handing a batch's messages of one group to user code one after another
        (kmq.worker): may ``m`` go now that ``earlier`` (the one before it) is done with?

        No, and ``m`` is given back uncounted (so are the rest of its run, by the same
        check), when ``earlier`` failed (released, lapsed, dead-lettered holding its group)
        or is still held, or ``m``'s visibility is nearly out (group_gate's margin). A
        message without a group always may.
        """
        if m.group_bytes is None:
            return True
        held, rel = m[1], m[2]
        hold = self._holds_dead_letters()
        ok = G.fate(earlier[1].state[earlier[2]], earlier.lapsed, hold) == G.DONE
        if ok and not held.state[rel] and rel not in held.lapsed:
            now = time.monotonic()
            i = held.rels.index(rel)
            left = G.remaining_s(now, extended_at=held.extended_at,
                                 visibility_s=self.visibility_timeout_s,
                                 handed_at=held.handed_at()[i], max_processing_s=self.max_processing_s)
            if left >= G.margin_s(self.visibility_timeout_s):
                return True
        self._return_message(m)
        return False

    def give_back(self: "Consumer", m: Message) -> bool:
        """Give back uncounted a message handed out that will not reach user code (a runner
        stopping before it); False if it was settled or lapsed already."""
        return self._return_message(m)

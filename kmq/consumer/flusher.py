"""A consumer's way out: recorded verbs turned into markers, and the flusher thread that sends them.

Verbs (``ack()``, ``release()``, ...) are recorded in memory by any thread
(:mod:`kmq.consumer.settlement`); the flusher, a background thread, drains them into
one marker per range within ``flush_interval_s`` of the first one (at once when a
shared consumer ran out of work), extends what the consumer still holds
(:mod:`kmq.consumer.keepalive`), renews a shared consumer's credit and checks the
queue's settings. It sleeps until the next of those is due, so an idle consumer
costs a few wake-ups a second.

:class:`Flusher` is mixed into :class:`kmq.consumer.facade.Consumer` and works on its
state; it stands apart because it is the consumer's second thread, with its own
rules (no librdkafka consumer call, see :meth:`Flusher._flush_loop`).
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Callable

from kmq.consumer.held import HeldRange
from kmq.consumer.keepalive import keepalive_round
from kmq.consumer.user_code import user_code_away
from kmq.message import Message
from kmq.protocol import markers as M

log = logging.getLogger("kmq.consumer")

CONFIG_CHECK_S = 0.5  # how often a consumer picks up its queue's new settings
IDLE_WAKE_S = 0.25     # the flusher wakes at least this often (credit heartbeats, checks)


class Flusher:
    """Settlements out as markers, keepalives, credits and settings checks, on a thread of their own."""

    def _drain_settlements(self) -> list[M.Marker]:
        """Turn recorded verbs into per-range markers (lock held)."""
        markers, counts = self._log.drain(self._settled_in)
        if counts["by-user-code"]:
            self._user_code_at = time.monotonic()  # user code is there (kmq.consumer.user_code)
        self.stats["acked"] += counts["acked"]
        self.stats["released"] += counts["released"]
        self.stats["rejected"] += counts["rejected"]
        self._in_flight -= counts["settled"]
        if counts["settled"]:
            self._source.on_settled(counts["settled"])
        return markers

    def _settled_in(self, held: HeldRange, mask: int) -> int:
        """Count the settled messages of ``mask`` out of ``held``; lapsed ones were counted
        when they lapsed."""
        n = mask.bit_count()
        if held.lapsed:
            n -= sum(1 for r in held.lapsed if mask >> r & 1)
        held.outstanding -= n
        if held.outstanding <= 0:
            self._held.pop(held.ref, None)
        return n

    def _set_error(self, exc: BaseException) -> None:
        self._error = exc

    def _raise_error(self) -> None:
        """Raise (once, on the receiving thread) what failed on the flusher or a callback."""
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _flush_settlements(self) -> None:
        markers = self._drain_settlements()
        if markers:
            self._send(markers)

    def _send(self, markers: list[M.Marker],
              on_written: Callable[[list[M.Marker]], None] | None = None) -> None:
        for i in range(0, len(markers), 1000):
            chunk = markers[i:i + 1000]
            self._writer.send(chunk, [], on_confirmed=_nothing,
                              on_written=None if on_written is None else partial(on_written, chunk))
            self.stats["markers"] += 1

    def _keepalive(self) -> None:
        """Extend what this consumer still holds; count what lapsed (see kmq.consumer.keepalive)."""
        now, held_ranges = time.monotonic(), list(self._held.values())
        if self._source.mode == "shared":
            self._follow_user_code(now, held_ranges)
        else:
            self._user_code_away = False  # its partitions have nowhere else to go
        out, lapsed = keepalive_round(
            held_ranges, now=now, visibility_s=self.visibility_timeout_s,
            max_processing_s=self.max_processing_s, interval_s=self.keepalive_interval_s,
            timeout_ms=self._timeout_ms, group_of=_group_of if self._gate is not None else None,
            read_ahead=not self._user_code_away)
        for held in list(self._held.values()):
            if held.outstanding <= 0:
                self._held.pop(held.ref, None)
        self._in_flight -= lapsed
        if lapsed:
            self._source.on_settled(lapsed)
        self.stats["lapsed"] = self.stats.get("lapsed", 0) + lapsed
        if out:
            extended = {m.range: self._held.get(m.range) for m in out}  # not all: they may be thousands
            self._send(out, on_written=partial(_extended, extended, now, not self._user_code_away))

    def _back(self) -> None:
        """User code receives again: its consumer asks for work again, at once (the
        receiving thread; the flusher says so)."""
        self._user_code_at = time.monotonic()
        self._user_code_away = False
        self._log.wake.set()

    def _wait_begins(self) -> int | None:
        """A receive that may wait begins (the receiving thread): user code is there while it
        does, however long (an audit: a thread waiting in receive(30) while another held a
        message past its give-up was not, and got nothing until that message lapsed).
        Returns what :meth:`_wait_ends` takes (None: a gated receive that reads, counted)."""
        me = threading.get_ident()
        if me in self._receiving:
            return None
        self._receiving.add(me)
        return me

    def _wait_ends(self, me: int | None) -> None:
        if me is not None:
            self._receiving.discard(me)
            self._user_code_at = time.monotonic()

    def _follow_user_code(self, now: float, held_ranges: list[HeldRange]) -> None:
        """A shared consumer whose user code is away asks for nothing more until it is back
        (kmq.consumer.user_code); it says so at once either way (lock held)."""
        said_at = self._user_code_at
        active_at = max([said_at] + [h.handouts[-1][1] for h in held_ranges if h.handouts])
        away = not self._receiving and user_code_away(held_ranges, now=now, active_at=active_at, visibility_s=self.visibility_timeout_s,
                              max_processing_s=self.max_processing_s, interval_s=self.keepalive_interval_s)
        if away and self._user_code_at != said_at:
            away = False  # a receive came meanwhile (it does not take the lock)
        if (not away and self._user_code_away and not self._receiving
                and self._user_code_at == said_at <= self._away_since):
            # What user code holds lapsed and its range left held_ranges: user code is still
            # not back. Before (an audit), the consumer asked again and held what came for as
            # long as user code hung: 10-20 s late, while another consumer idled.
            away = True
        if away != self._user_code_away:
            self._user_code_away = away
            self._away_since = now
            self.stats["user-code-away"] = self.stats.get("user-code-away", 0) + away
            self._source.flusher_work()
        if self._user_code_away and self._ready:
            # What user code has not taken goes back at once, uncounted (and what reaches the
            # lane while it is away, each round): left to lapse with the message user code
            # holds, it came back a visibility timeout later, counted, so with max_deliveries 1
            # an ordered run was dead-lettered without reaching user code (an audit).
            self.stats["returned-away"] = self.stats.get("returned-away", 0) + self._return_unhanded()

    def _flush_loop(self) -> None:
        """Send settlements within ``flush_interval_s`` of the first one, at once when a shared
        consumer ran out of work; renew credits, extend held messages, follow the settings.

        It sleeps until the next of those is due (woken by the first verb after a flush and
        by a receive that found nothing ready): an idle consumer costs a few wake-ups a second.
        """
        now = time.monotonic()
        next_keepalive = now + self.keepalive_interval_s
        next_config = now + CONFIG_CHECK_S
        flush_at: float | None = None  # when the oldest unsent verb must go out
        log_, wake = self._log, self._log.wake
        while not self._stop.is_set():
            now = time.monotonic()
            until = min(next_keepalive, next_config, now + IDLE_WAKE_S,
                        flush_at if flush_at is not None else now + IDLE_WAKE_S)
            wake.wait(max(0.0, until - now))
            wake.clear()
            if self._stop.is_set():
                return
            try:
                self._writer.producer.poll(0)
                with self._lock:
                    # No librdkafka *consumer* call here: confluent-kafka lets one
                    # thread at a time into a Consumer (its PR #2322), and the
                    # user thread's polls would starve us. Commits happen on the
                    # receiving thread (fetch, rebalance callbacks, close).
                    now = time.monotonic()
                    send, flush_at = flush_due(bool(log_), flush_at, now, self.flush_interval_s,
                                               self._source.starving)
                    if send:
                        self._flush_settlements()
                    self._source.flusher_work()
                    if now >= next_config:
                        next_config = now + CONFIG_CHECK_S
                        self._follow_config()
                    if now >= next_keepalive:
                        next_keepalive = now + self.keepalive_interval_s
                        self._keepalive()
                # Outside the lock: the receiving thread takes it while it reads.
                self._source.read_in_background()
            except Exception as exc:  # surface to the user thread, never die silently
                log.exception("queue %s: flusher failed", self.queue)
                self._error = exc

    def _stop_flusher(self) -> None:
        """Crash tests: no more settlements, keepalives, credits or transactions of our own."""
        self._stop.set()
        self._log.wake.set()
        self._flusher.join()

    def _vanish(self) -> None:
        """Crash tests: die without a goodbye, as a killed process would (no release, no
        keepalive, no farewell); only the Kafka clients are closed, so a group need not wait
        out this member's session."""
        self._stop_flusher()
        self._source.close()


def flush_due(pending: bool, flush_at: float | None, now: float, interval_s: float,
              starving: Callable[[], bool]) -> tuple[bool, float | None]:
    """Whether to send the recorded verbs now, and when the ones left must go out.

    ``flush_at`` is the deadline set at the first verb after a flush (None: no verb
    waits). Nothing pending means another thread sent them meanwhile (a fetch takes them
    along with its START, a ``flush()``, a full ``max_in_flight``): the deadline goes with
    them. Kept, a past deadline woke the flusher at once, again and again, until the next
    verb (measured: 13% of a partition consumer's busy samples, between its fetches).
    """
    if not pending:
        return False, None
    if flush_at is None:
        flush_at = now + interval_s
    if now >= flush_at or starving():
        return True, None
    return False, flush_at


def _nothing() -> None:
    pass


def _extended(held_by_ref: dict[M.RangeRef, HeldRange | None], decided_at: float, read_ahead: bool,
              written: list[M.Marker]) -> None:
    """The EXTENDs ``written`` (decided at ``decided_at``; of the read-ahead too unless user
    code was away) reached the broker: the tracker keeps what they named invisible for a
    visibility timeout from then at least (kmq.consumer.stale). Set here, not when decided:
    a stall between the two kept nothing invisible."""
    for m in written:
        held = held_by_ref.get(m.range)
        if held is None:
            continue
        if decided_at > held.kept_at:
            held.kept_at = decided_at
        if read_ahead and decided_at > held.extended_at:
            held.extended_at = decided_at


def _group_of(held: HeldRange, i: int) -> bytes | None:
    """The ordered queue's group of ``held``'s ``i``-th message (keepalive's runs rule)."""
    return Message((held.recs[i], held, held.rels[i])).group_bytes

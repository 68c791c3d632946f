"""Ordered message groups and deduplication, pure: which record of a group may go out now.

A queue with ``ordering="group"`` hands out, per *group* (the ``kmq.group`` header),
one message at a time and in send order (docs/ordering.md). Its dispatcher keeps one
:class:`GroupOrder` per queue partition it serves:

- :meth:`GroupOrder.offer` takes each record of the queue as it is read (offset order);
  a record carrying the id of a group's head that went away (released, timed out,
  redriven) is that head coming back and goes first.
- :meth:`GroupOrder.take` gives the heads of groups with nothing in flight, at most one
  per group, the group that became ready first first (a hot group is one group).
- :meth:`GroupOrder.settled` / :meth:`GroupOrder.dead_lettered` free a group.
- :meth:`GroupOrder.purge_below` forgets what a queue purge removed: records below the
  purge point, and heads handed out (or held) from below it, whose settle never comes.

:class:`Dedup` decides on ``kmq.dedup-id``: the first record of an id opens a window of
``window_ms`` on the records' own timestamps (so a re-reader of the log decides the same);
later records of the id inside it are duplicates.

Time is an argument (``now_ms``); nothing here does I/O. State is per group with a message
waiting or in flight, and per dedup id within its window, both bounded.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass, field

MAX_GROUP_BYTES = 128          # SQS's MessageGroupId limit
MAX_DEDUP_ID_BYTES = 128       # SQS's MessageDeduplicationId limit
MAX_DEDUP_ENTRIES = 100_000  # ids remembered per queue partition (~20 MB); the oldest go first beyond
DEFAULT_DEDUP_WINDOW_S = 300.0  # SQS's figure
DEAD_LETTER_HEAD_POLICIES = ("continue", "hold")
ORDERINGS = ("none", "group")


def valid_group(raw: bytes | None) -> bytes | None:
    """The group of a record's ``kmq.group`` header, or None (absent, empty, too long)."""
    if not raw or len(raw) > MAX_GROUP_BYTES:
        return None
    return bytes(raw)


def valid_dedup_id(raw: bytes | None) -> bytes | None:
    """The dedup id of a record's ``kmq.dedup-id`` header, or None (absent, empty, too long)."""
    if not raw or len(raw) > MAX_DEDUP_ID_BYTES:
        return None
    return bytes(raw)


def dedup_message_id(queue: str, dedup_id: bytes) -> str:
    """The id every send of ``dedup_id`` on ``queue`` gets: the first's, with no round trip."""
    digest = hashlib.sha256(queue.encode() + b"\x00" + dedup_id).hexdigest()
    return "d-" + digest[:24]


@dataclass(slots=True)
class _Group:
    waiting: deque = field(default_factory=deque)  # (offset, msg_id), head first
    head_id: str | None = None     # the message the group waits for (in flight or away)
    head_offset: int | None = None  # where that head is in flight (None: away or none)
    head_since_ms: int = 0          # when the current head was first offered
    head_from: int = -1             # offset the head was last handed out from (a purge)
    held: bool = False              # dead-lettered head, policy "hold": wait for redrive


class GroupOrder:
    """The groups of one ordered queue partition (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[bytes, _Group] = {}
        self._ready: dict[bytes, None] = {}   # groups with a head to hand out, oldest first
        self._in_flight: dict[int, bytes] = {}  # offset -> group, heads handed out
        self._known: set[int] = set()          # offsets waiting or in flight
        self._offered_ms: dict[int, int] = {}  # offset -> when first offered (head age)
        # group -> where its returned head (waiting at its front) was handed out from: a
        # successor must read from there to know the copy is the group's head
        self._returned_from: dict[bytes, int] = {}

    def __len__(self) -> int:
        """Groups with a message waiting or in flight (what state is kept for)."""
        return len(self._groups)

    def ready(self) -> int:
        """Groups with a head to hand out now."""
        return len(self._ready)

    def waiting_records(self) -> int:
        return len(self._known) - len(self._in_flight)

    def offer(self, offset: int, msg_id: str, group: bytes, now_ms: int, returned_from: int | None = None) -> str:
        """One record of the queue, as read. Returns ``"queued"``, ``"returned"`` (a head that
        went away came back: it goes first) or ``"known"`` (read before: ignored).

        ``returned_from``: the offset of a record a predecessor dispatcher handed out, of
        which this is the copy republished before this one began (``kmq.protocol.handed``):
        its group's head, so it goes before the group's records waiting (behind a head still
        in flight)."""
        if offset in self._known:
            return "known"
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        self._known.add(offset)
        self._offered_ms[offset] = now_ms
        if returned_from is not None and g.head_id != msg_id:
            if not g.waiting and g.head_id is None:
                g.head_since_ms = now_ms
            g.waiting.appendleft((offset, msg_id))
            self._returned_from[group] = returned_from
            if g.head_id is None or (g.head_offset is None and not g.held):
                g.head_id, g.held = None, False
                self._ready[group] = None
            return "returned"
        if g.head_id == msg_id and g.head_offset is not None:
            # A republish read before the old delivery's end reached us: it replaces it.
            self._in_flight.pop(g.head_offset, None)
            self._forget(g.head_offset)
            g.head_offset = None
        if g.head_id == msg_id and g.head_offset is None:
            g.waiting.appendleft((offset, msg_id))
            self._returned_from[group] = g.head_from
            g.held = False
            self._ready[group] = None
            return "returned"
        g.waiting.append((offset, msg_id))
        if g.head_id is None and len(g.waiting) == 1:
            g.head_since_ms = now_ms
            self._ready[group] = None
        return "queued"

    def adopt(self, offset: int, msg_id: str, group: bytes, now_ms: int) -> bool:
        """A record a predecessor dispatcher handed out and the tracker still has in flight
        (``kmq.protocol.handed``): its group's head, in flight. Its group's records read
        later wait for its settle, or for its copy (by id) if it is republished. A second
        one of a group (a predecessor's broken order) is in flight too, but not the head.
        False if the offset is known already."""
        if offset in self._known:
            return False
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        self._known.add(offset)
        self._offered_ms[offset] = now_ms
        self._in_flight[offset] = group
        if g.head_id is None:
            g.head_id, g.head_offset, g.head_from, g.head_since_ms = msg_id, offset, offset, now_ms
            self._ready.pop(group, None)
        return True

    def lowest_handed(self) -> int | None:
        """The lowest offset handed out whose group still waits on it (in flight, or its
        copy waiting at the group's front): a successor must read from there to know it
        (the durable floor, docs/ordering.md)."""
        return min([*self._in_flight, *self._returned_from.values()], default=None)

    def take(self, n: int, now_ms: int) -> list[tuple[int, bytes]]:
        """Up to ``n`` records to hand out now: (offset, group), one per group, each its
        group's head; they are in flight from here on."""
        out: list[tuple[int, bytes]] = []
        while len(out) < n and self._ready:
            group = next(iter(self._ready))
            del self._ready[group]
            self._returned_from.pop(group, None)
            g = self._groups[group]
            offset, msg_id = g.waiting.popleft()
            if g.head_id != msg_id:
                g.head_since_ms = self._offered_ms.get(offset, now_ms)
            g.head_id, g.head_offset, g.head_from = msg_id, offset, offset
            self._in_flight[offset] = group
            out.append((offset, group))
        return out

    def give_back(self, offset: int) -> None:
        """A taken record that could not be handed out after all: first again."""
        group = self._in_flight.pop(offset, None)
        if group is None:
            return
        g = self._groups[group]
        g.waiting.appendleft((offset, g.head_id))
        g.head_offset = None
        self._ready = {group: None, **self._ready}

    def settled(self, offset: int) -> bool:
        """The message at ``offset`` was acked (or dropped): its group goes on.
        False if it was not a head in flight (ignored)."""
        group = self._in_flight.pop(offset, None)
        if group is None:
            return False
        self._forget(offset)
        g = self._groups.get(group)
        if g is None or g.head_offset != offset:
            return True  # an adopted second one of the group (see adopt): not its head
        g.head_id, g.head_offset = None, None
        self._next(group, g)
        return True

    def dead_lettered(self, offset: int, hold: bool) -> bool:
        """The head at ``offset`` went to the dead letters: its group goes on (``hold``
        False, SQS) or waits until the message comes back by id (a redrive)."""
        if not hold:
            return self.settled(offset)
        group = self._in_flight.pop(offset, None)
        if group is None:
            return False
        self._forget(offset)
        g = self._groups.get(group)
        if g is None or g.head_offset != offset:
            return True  # an adopted second one of the group (see adopt): not its head
        g.head_offset = None
        g.held = True
        return True

    def purge_below(self, offset: int) -> int:
        """The queue was purged below ``offset`` (its purge point): forget those records.

        Records waiting below it are never handed out. A head handed out (in flight, or
        gone to be republished) or dead-lettered and held from below it no longer holds
        its group: the tracker forgot it at the purge, so no settle and no republish
        comes. Records at or above ``offset`` were sent after the purge and stay, with
        their order. Returns how many records and heads were dropped."""
        dropped = 0
        for group, g in list(self._groups.items()):
            kept: deque = deque()
            for o, msg_id in g.waiting:
                if o >= offset:
                    kept.append((o, msg_id))
                else:
                    self._forget(o)
                    dropped += 1
            g.waiting = kept
            if g.head_offset is not None and g.head_offset < offset:  # in flight or away
                self._in_flight.pop(g.head_offset, None)
                self._forget(g.head_offset)
                g.head_id, g.head_offset = None, None
                dropped += 1
            elif g.held and g.head_from < offset:
                g.head_id, g.held = None, False
                dropped += 1
            elif g.head_offset is None and not g.held and g.head_id is not None \
                    and not (g.waiting and g.waiting[0][1] == g.head_id):
                g.head_id = None  # a returned head waiting at the front, dropped above
            if g.head_id is not None and (g.head_offset is not None or g.held):
                self._ready.pop(group, None)  # still waits for its head
            elif g.waiting:
                if g.head_id is None:
                    g.head_since_ms = self._offered_ms.get(g.waiting[0][0], 0)
                self._ready.setdefault(group, None)
            else:
                self._ready.pop(group, None)
                del self._groups[group]
        for o in [o for o in self._in_flight if o < offset]:  # adopted ones that were no head
            del self._in_flight[o]
            self._forget(o)
        self._returned_from = {k: o for k, o in self._returned_from.items()
                               if k in self._groups and o >= offset}
        return dropped

    def _next(self, group: bytes, g: _Group) -> None:
        if g.waiting:
            g.head_since_ms = self._offered_ms.get(g.waiting[0][0], 0)
            self._ready[group] = None
        else:
            del self._groups[group]  # O(active groups): an idle group costs nothing

    def _forget(self, offset: int) -> None:
        self._known.discard(offset)
        self._offered_ms.pop(offset, None)

    def in_flight(self) -> dict[int, bytes]:
        """Heads handed out and not settled: offset -> group."""
        return dict(self._in_flight)

    def gauges(self, now_ms: int) -> dict[str, int]:
        """Groups with messages waiting, groups in flight (or waiting for their head to come
        back), and the oldest head's age in ms (0: none)."""
        waiting = in_flight = 0
        oldest = None
        for g in self._groups.values():
            if g.head_id is not None:
                in_flight += 1
            elif g.waiting:
                waiting += 1
            if oldest is None or g.head_since_ms < oldest:
                oldest = g.head_since_ms
        return {"groups_waiting": waiting, "groups_in_flight": in_flight,
                "oldest_head_age_ms": 0 if oldest is None else max(0, now_ms - oldest)}


class Dedup:
    """Deduplication of one queue partition by ``kmq.dedup-id`` (see the module docstring).

    ``ts_ms`` is the record's timestamp: the log's time, so the decision depends on the log
    only. Entries leave when the largest timestamp seen is past their window, or, beyond
    ``max_entries``, oldest first (counted in ``evicted``).
    """

    def __init__(self, window_ms: int, max_entries: int = MAX_DEDUP_ENTRIES) -> None:
        if window_ms <= 0 or max_entries <= 0:
            raise ValueError("window_ms and max_entries must be positive")
        self.window_ms = window_ms
        self.max_entries = max_entries
        # id -> (ts, offset, msg id) of the window's first record
        self._first: OrderedDict[bytes, tuple[int, int, str]] = OrderedDict()
        self._clock_ms = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._first)

    def check(self, dedup_id: bytes, msg_id: str, offset: int, ts_ms: int) -> str | None:
        """None: the record at ``offset`` is the first of its id in the window (accepted; also
        when that record is read again); else the first record's message id (this one is a
        duplicate, to drop)."""
        if ts_ms > self._clock_ms:
            self._clock_ms = ts_ms
            self._expire()
        first = self._first.get(dedup_id)
        if first is not None and first[1] == offset:
            return None
        if first is not None and abs(ts_ms - first[0]) < self.window_ms:
            return first[2]
        self._first.pop(dedup_id, None)
        self._first[dedup_id] = (ts_ms, offset, msg_id)
        while len(self._first) > self.max_entries:
            self._first.popitem(last=False)
            self.evicted += 1
        return None

    def _expire(self) -> None:
        horizon = self._clock_ms - self.window_ms
        first = self._first
        while first:
            key, (ts, _, _) = next(iter(first.items()))
            if ts > horizon:
                return
            del first[key]

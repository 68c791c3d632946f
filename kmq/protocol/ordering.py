"""Ordered message groups, pure: which records of a group may go out now, and to whom.

A queue with ``ordering="group"`` hands out, per *group* (the ``kmq.group`` header), its
messages in send order, a group to one consumer at a time (docs/ordering.md). Its
dispatcher keeps one :class:`GroupOrder` per queue partition it serves:

- :meth:`GroupOrder.offer` takes each record of the queue as it is read (offset order);
  a record carrying the id of a message of a group's *run* that went away (released,
  timed out, redriven) is that message coming back.
- :meth:`GroupOrder.take` gives records to one consumer: from each group with nothing in
  flight, its oldest waiting records, up to ``run`` of them (a *run*, handed out in order
  as one delivery; the consumer handles them one at a time, kmq.consumer.group_gate), or
  the first message of its run that came back, alone. A group with a message at a
  consumer gives nothing more; a hot group is one group, and the rest of a run never
  takes the last of a consumer's credit (:func:`run_room`).
- :meth:`GroupOrder.settled` / :meth:`GroupOrder.dead_lettered` end a run's messages;
  the group goes on when its run is over.
- :meth:`GroupOrder.purge_below` forgets what a queue purge removed: records below the
  purge point, and messages handed out (or held) from below it, whose settle never comes.

Time is an argument (``now_ms``); nothing here does I/O. State is per group with a message
waiting or in flight (:mod:`kmq.protocol.group_runs`). Deduplication is
:mod:`kmq.protocol.dedup`'s (re-exported here).
"""

from __future__ import annotations

from kmq.protocol.group_purge import PurgeAndGauges
from kmq.protocol.group_runs import _Group, _Member
from kmq.protocol.dedup import (DEFAULT_DEDUP_WINDOW_S, MAX_DEDUP_ENTRIES, MAX_DEDUP_ID_BYTES,  # noqa: F401
                                Dedup, dedup_message_id, valid_dedup_id)

MAX_GROUP_BYTES = 128          # SQS's MessageGroupId limit
DEAD_LETTER_HEAD_POLICIES = ("continue", "hold")
ORDERINGS = ("none", "group")


def valid_group(raw: bytes | None) -> bytes | None:
    """The group of a record's ``kmq.group`` header, or None (absent, empty, too long)."""
    if not raw or len(raw) > MAX_GROUP_BYTES:
        return None
    return bytes(raw)


def run_room(left: int, others_wait: bool, going_on: bool = False) -> int:
    """How many records of one group may go to a consumer that has ``left`` of its credit:
    a new run's first always; the rest of a run (what waits at the consumer while its user
    code holds the one before) never the last of the credit, kept for another group's
    first (filled by one run, a consumer whose user code held its first took nothing else
    while it did: docs/ordering.md), and at most half while other groups wait. A run going
    on (``going_on``: its first is at the consumer) is all such rest."""
    room = max(0, left // 2 if others_wait else left - 1)
    return room if going_on else max(1, room)


class GroupOrder(PurgeAndGauges):
    """The groups of one ordered queue partition (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[bytes, _Group] = {}
        self._ready: dict[bytes, None] = {}     # groups with something to hand out, oldest first
        self._in_flight: dict[int, bytes] = {}  # offset -> group, at a consumer (or away unseen)
        self._known: set[int] = set()           # offsets waiting, back, or in flight
        self._offered_ms: dict[int, int] = {}   # offset -> when first offered (head age)
        self._owned: dict[str, dict[bytes, None]] = {}  # consumer -> groups whose run goes on there
        self.held = 0  # messages dead-lettered and held (policy "hold"): away until redriven

    def __len__(self) -> int:
        """Groups with a message waiting or in flight (what state is kept for)."""
        return len(self._groups)

    def ready(self) -> int:
        """Groups with something to hand out now."""
        return len(self._ready)

    def waiting_records(self) -> int:
        return len(self._known) - len(self._in_flight)

    def _update(self, group: bytes, g: _Group) -> None:
        """Whether ``group`` can give something: nothing of it at a consumer, and its run's
        first message back (a copy, alone), or no run and records waiting."""
        if g.run:
            ok = g.run[0].back is not None and all(m.offset is None for m in g.run)
        else:
            ok = bool(g.waiting)
        if ok:
            self._ready.setdefault(group, None)
        else:
            self._ready.pop(group, None)

    def offer(self, offset: int, msg_id: str, group: bytes, now_ms: int, returned_from: int | None = None) -> str:
        """One record of the queue, as read. Returns ``"queued"``, ``"returned"`` (a message
        of the group's run came back: it goes out before the group's waiting records) or
        ``"known"`` (read before, or a second copy: ignored).

        ``returned_from``: the offset of the first record of a message a predecessor
        dispatcher handed out, of which this is a copy republished before this one began
        (``kmq.protocol.handed``): it joins its group's run, placed by that offset."""
        if offset in self._known:
            return "known"
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        m = g.ids.get(msg_id)
        if m is None and returned_from is not None:
            m = _Member(msg_id, None, returned_from, returned_from)
            g.join(m)
            if g.run[0] is m:
                g.since_ms = now_ms
        if m is not None:
            if m.back is not None:
                return "known"  # one copy waits already; this one is never handed out
            if m.offset is not None:
                # A republish read before the old delivery's end reached us: it replaces it.
                self._in_flight.pop(m.offset, None)
                self._forget(m.offset)
                m.offset = None
            self._known.add(offset)
            self._offered_ms[offset] = now_ms
            self.held -= m.held
            m.back, m.held = offset, False
            self._disown(group, g)
            self._update(group, g)
            return "returned"
        self._known.add(offset)
        self._offered_ms[offset] = now_ms
        g.waiting.append((offset, msg_id))
        g.waiting_ids.add(msg_id)
        if not g.run and len(g.waiting) == 1:
            g.since_ms = now_ms
            self._ready[group] = None
        return "queued"

    def holds(self, group: bytes, msg_id: str) -> bool:
        """Whether ``msg_id`` is a message of ``group`` not settled (waiting or in its run): a
        send of a dedup id after its window has the first's id, and one id must name one
        message of a group (a copy is known by it)."""
        g = self._groups.get(group)
        return g is not None and (msg_id in g.ids or msg_id in g.waiting_ids)

    def adopt(self, offset: int, msg_id: str, group: bytes, now_ms: int, first: int | None = None) -> bool:
        """A record a predecessor dispatcher handed out and the tracker still has in flight
        (``kmq.protocol.handed``): in flight in its group's run, placed by ``first`` (the
        offset of the message's first record, when read; else this one's). The group's
        records read later wait for the run to end. False if the offset is known."""
        if offset in self._known:
            return False
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        self._known.add(offset)
        self._offered_ms[offset] = now_ms
        self._in_flight[offset] = group
        m = _Member(msg_id, offset, offset, offset if first is None else first)
        g.join(m)
        if g.run[0] is m:
            g.since_ms = now_ms
        self._update(group, g)
        return True

    def lowest_handed(self) -> int | None:
        """The lowest first record of a message in a run (in flight, away, or its copy
        waiting to go out again): a successor must read from there to know the run and its
        order (the durable floor, docs/ordering.md). O(messages in runs)."""
        return min((m.first for g in self._groups.values() for m in g.run), default=None)

    def take(self, n: int, now_ms: int, run: int = 1, max_gap: int | None = None,
             consumer: str | None = None) -> list[tuple[int, bytes]]:
        """Up to ``n`` records for one consumer: (offset, group), each group's in its order;
        they are in flight from here on. First, the groups whose run went to ``consumer``
        and is all still there give it their next waiting records (the run goes on: it is
        handled there in order, and a run broken there is given back whole, by its id,
        :meth:`chain`). Then each ready group gives its run's first message that came
        back, alone, or up to ``run`` of its waiting records, no two more than
        ``max_gap`` offsets apart (one delivery holds a run whole). ``n`` is the
        consumer's credit: how much of it a run may take is :func:`run_room`'s."""
        out: list[tuple[int, bytes]] = []
        # Room for the rest of runs never fills the credit (run_room()): a consumer whose user
        # code holds a hot group's head gets other groups too (handled meanwhile).
        owned_room = run_room(n, bool(self._ready), going_on=True)
        for group in list(self._owned.get(consumer, ())) if consumer is not None else ():
            g = self._groups[group]
            if len(out) >= owned_room:
                break
            if g.waiting and all(m.offset is not None for m in g.run):
                self._take_waiting(group, g, min(run, owned_room - len(out)), max_gap, out)
        while len(out) < n and self._ready:
            group = next(iter(self._ready))
            del self._ready[group]
            g = self._groups[group]
            if g.run:  # a message that came back goes out again alone, a run of its own
                m = g.run[0]
                offset, m.back = m.back, None
                m.offset = m.handed_from = offset
                self._in_flight[offset] = group
                g.chain = offset
                out.append((offset, group))
                continue
            g.since_ms = self._offered_ms.get(g.waiting[0][0], now_ms)
            g.chain = g.waiting[0][0]
            if consumer is not None:
                g.owner = consumer
                self._owned.setdefault(consumer, {})[group] = None
            self._take_waiting(group, g, min(run, run_room(n - len(out), bool(self._ready))), max_gap, out)
        return out

    def _take_waiting(self, group: bytes, g: _Group, k: int, max_gap: int | None,
                      out: list[tuple[int, bytes]]) -> None:
        last = None
        while g.waiting and k > 0:
            offset, msg_id = g.waiting[0]
            if last is not None and max_gap is not None and offset - last > max_gap:
                break
            g.waiting.popleft()
            g.waiting_ids.discard(msg_id)
            m = g.ids[msg_id] = _Member(msg_id, offset, offset, offset)
            g.run.append(m)
            self._in_flight[offset] = group
            out.append((offset, group))
            last = offset
            k -= 1

    def chain(self, group: bytes) -> int:
        """The id of the run ``group``'s records last taken belong to (its consumer gives back
        the rest of a run by it, kmq.consumer.group_gate)."""
        return self._groups[group].chain

    def _disown(self, group: bytes, g: _Group) -> None:
        """The run no longer goes on at its consumer (over, or some of it went away)."""
        if g.owner is not None:
            owned = self._owned.get(g.owner)
            if owned is not None:
                owned.pop(group, None)
                if not owned:
                    del self._owned[g.owner]
            g.owner = None

    def settled(self, offset: int) -> bool:
        """The message at ``offset`` was acked (or dropped): it leaves its run; the group goes
        on when the run is over. False if it was not in flight (ignored)."""
        group = self._in_flight.pop(offset, None)
        if group is None:
            return False
        self._forget(offset)
        g = self._groups[group]
        head = g.run[0].offset == offset
        g.leave(g.run[0] if head else next(x for x in g.run if x.offset == offset))
        if not g.run:
            self._disown(group, g)
        if not g.run and not g.waiting:
            del self._groups[group]  # O(active groups): an idle group costs nothing
            self._ready.pop(group, None)
            return True
        if head:
            g.since_ms = self._head_read_ms(g)
        self._update(group, g)
        return True

    def _head_read_ms(self, g: _Group) -> int:
        """When ``g``'s new head was read: its copy waiting, its record at a consumer, or its
        first waiting record. A head away (its copy not read yet) keeps the age it had: the
        run's next message at a consumer was read as 0, and the age was the machine's uptime."""
        if g.run:
            m = g.run[0]
            at = m.back if m.back is not None else m.offset
        else:
            at = g.waiting[0][0]
        return self._offered_ms.get(at, g.since_ms) if at is not None else g.since_ms

    def dead_lettered(self, offset: int, hold: bool) -> bool:
        """The message at ``offset`` went to the dead letters: it leaves its run (``hold``
        False, SQS) or stays in it, away, until it comes back by id (a redrive)."""
        if not hold:
            return self.settled(offset)
        group = self._in_flight.pop(offset, None)
        if group is None:
            return False
        self._forget(offset)
        g = self._groups[group]
        m = next(x for x in g.run if x.offset == offset)
        m.offset, m.held = None, True
        self.held += 1
        self._disown(group, g)
        self._update(group, g)
        return True

    def _forget(self, offset: int) -> None:
        self._known.discard(offset)
        self._offered_ms.pop(offset, None)

    def in_flight(self) -> dict[int, bytes]:
        """Messages handed out and not settled, not known to be away: offset -> group."""
        return dict(self._in_flight)

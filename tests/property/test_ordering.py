"""Property tests of ordered message groups (kmq.protocol.ordering).

The model: a log of records (offset, id, group); a consumer takes records (runs of a
group: several of its messages, handled one at a time in order), then acks, releases
(the rest of the run is given back with it), times out (the rest given back later),
gets killed, or dead-letters them; a message that goes away comes back as a new record
at the end of the log with the same id (the tracker's republish, or a redrive), copies
in any order. Whatever the interleaving:

- a group's messages at consumers are all at one consumer, from one take;
- a take hands out a group's messages only as the next ones not settled, in send order,
  and only when none of the group is at a consumer: nothing is reordered, nothing goes
  out before an earlier one of its group is settled (acked, or dead-lettered with the
  "continue" policy) or handed out before it in the same run;
- every message is eventually handed out when nothing is in flight (no group stuck but a
  held one), and state is kept only for groups with something waiting or in flight;
- a purge below a point drops every message whose record lies below it (never handed out
  after, never holding its group) and keeps the order of what was sent after it.

Then the hand-out case by case; runs, purges and deduplication case by case are in
test_ordering_runs.py, test_ordering_purge.py and test_ordering_dedup.py.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kmq.protocol.ordering import MAX_GROUP_BYTES, GroupOrder, valid_dedup_id, valid_group

GROUPS = [b"a", b"b", b"c", b"hot", b"x" * MAX_GROUP_BYTES]


START_MS = 10**9  # the clock at the start: an age measured from 0 shows


class OrderedQueue(RuleBasedStateMachine):
    """GroupOrder driven like a dispatcher drives it, against a model of each group."""

    @initialize(hold=st.booleans(), n_groups=st.integers(1, len(GROUPS)))
    def setup(self, hold, n_groups):
        self.order = GroupOrder()
        self.hold = hold
        self.groups = GROUPS[:n_groups]
        self.now = START_MS
        self.next_offset = 0
        self.next_id = 0
        self.sent: dict[bytes, list[str]] = {g: [] for g in self.groups}   # send order per group
        self.settled: set[str] = set()      # acked, or dead-lettered with "continue"
        self.held: dict[bytes, str] = {}    # group -> dead-lettered head (policy "hold")
        self.in_flight: dict[int, tuple[str, bytes, int]] = {}  # offset -> (id, group, consumer)
        self.away: list[tuple[str, bytes, int, int]] = []  # went away: (id, group, old offset, consumer)
        self.handed: list[tuple[bytes, str]] = []  # every hand-out, in order
        self.record_of: dict[str, int] = {}  # message -> offset of its latest record
        self.id_at: dict[int, str] = {}      # offset -> message
        self.purged: set[str] = set()        # dropped by a purge: count as settled

    def _append(self, msg_id, group):
        offset = self.next_offset
        self.next_offset += 1 + (offset % 3 == 0)  # other queues' records in between
        self.record_of[msg_id] = offset
        self.id_at[offset] = msg_id
        self.order.offer(offset, msg_id, group, self.now)

    def _pending(self, group):
        return [m for m in self.sent[group] if m not in self.settled and m not in self.purged]

    @rule(g=st.integers(0, 4), k=st.integers(1, 5))
    def send(self, g, k):
        group = self.groups[g % len(self.groups)]
        for _ in range(k):
            msg_id = f"m{self.next_id}"
            self.next_id += 1
            self.sent[group].append(msg_id)
            self._append(msg_id, group)

    @rule(n=st.integers(1, 8), consumer=st.integers(0, 2), ms=st.integers(0, 50), run=st.integers(1, 4))
    def take(self, n, consumer, ms, run):
        self.now += ms
        taken = self.order.take(n, self.now, run, consumer=str(consumer))
        assert len(taken) <= n
        # What the dispatcher may believe is at each consumer: in flight, or gone away
        # unseen (its copy not read yet)
        there: dict[bytes, dict[int, list[str]]] = {}
        for msg_id, group, c in [*self.in_flight.values(), *[(a[0], a[1], a[3]) for a in self.away]]:
            there.setdefault(group, {}).setdefault(c, []).append(msg_id)
        by_group: dict[bytes, list[str]] = {}
        for offset, group in taken:
            by_group.setdefault(group, []).append(self.id_at[offset])
        for group, ids in by_group.items():
            assert len(ids) <= run
            elsewhere = {c for c in there.get(group, {}) if c != consumer}
            assert not elsewhere, f"group {group!r} handed to {consumer} while some of it is at {elsewhere}"
            mine = there.get(group, {}).get(consumer, [])
            pending = self._pending(group)
            before = [m for m in pending if m in mine]
            assert before == pending[:len(before)], f"{ids} handed after a gap in {pending}"
            nxt = pending[len(before):len(before) + len(ids)]
            assert ids == nxt, f"{ids} handed out, but {nxt} are next"
            assert not any(m in self.settled or m in self.purged for m in ids)
        for offset, group in taken:
            self.in_flight[offset] = (self.id_at[offset], group, consumer)
            self.handed.append((group, self.id_at[offset]))

    def _heads_at_consumers(self):
        """Groups whose next message is at a consumer: the only one it may settle."""
        at = {v[0]: o for o, v in self.in_flight.items()}
        out = []
        for group in self.groups:
            pending = self._pending(group)
            if pending and pending[0] in at:
                out.append(at[pending[0]])
        return sorted(out)

    @precondition(lambda self: self._heads_at_consumers())
    @rule(i=st.integers(0, 100))
    def ack(self, i):
        heads = self._heads_at_consumers()
        offset = heads[i % len(heads)]
        msg_id, _, _ = self.in_flight.pop(offset)
        assert self.order.settled(offset)
        self.settled.add(msg_id)

    @precondition(lambda self: self._heads_at_consumers())
    @rule(i=st.integers(0, 100), rest=st.booleans())
    def release_or_time_out(self, i, rest):
        """The head goes away; the rest of its run at the consumer is given back with it, or
        later (``give_back_rest``: it timed out while its consumer worked on the head)."""
        heads = self._heads_at_consumers()
        offset = heads[i % len(heads)]
        msg_id, group, c = self.in_flight.pop(offset)
        self.away.append((msg_id, group, offset, c))  # the dispatcher is told nothing until it returns
        if rest:
            self.give_back_rest()

    @rule()
    def give_back_rest(self):
        """Messages at a consumer behind a head that is not there: the consumer gives them back."""
        for offset, (msg_id, group, c) in sorted(self.in_flight.items()):
            pending = self._pending(group)
            if pending and pending[0] not in {v[0] for v in self.in_flight.values()}:
                del self.in_flight[offset]
                self.away.append((msg_id, group, offset, c))

    @precondition(lambda self: self.in_flight)
    @rule(consumer=st.integers(0, 2))
    def kill_consumer(self, consumer):
        for offset, (msg_id, group, c) in list(self.in_flight.items()):
            if c == consumer:
                del self.in_flight[offset]
                self.away.append((msg_id, group, offset, c))

    @precondition(lambda self: self._heads_at_consumers())
    @rule(i=st.integers(0, 100))
    def dead_letter(self, i):
        heads = self._heads_at_consumers()
        offset = heads[i % len(heads)]
        msg_id, group, _ = self.in_flight.pop(offset)
        assert self.order.dead_lettered(offset, self.hold)
        if self.hold:
            self.held[group] = msg_id
        else:
            self.settled.add(msg_id)

    @precondition(lambda self: self.away)
    @rule(i=st.integers(0, 100))
    def republish(self, i):
        msg_id, group, _, _ = self.away.pop(i % len(self.away))
        assert self.order.offer(self.next_offset, msg_id, group, self.now) == "returned"
        self.record_of[msg_id] = self.next_offset
        self.id_at[self.next_offset] = msg_id
        self.next_offset += 1

    @precondition(lambda self: self.held)
    @rule()
    def redrive(self):
        group, msg_id = self.held.popitem()
        assert self.order.offer(self.next_offset, msg_id, group, self.now) == "returned"
        self.record_of[msg_id] = self.next_offset
        self.id_at[self.next_offset] = msg_id
        self.next_offset += 1

    @rule()
    def let_held_go(self):
        """``dead_letter_head`` set to "continue": held groups go on (their dead letters were
        purged, or will never be redriven), as if each head had been dead-lettered then."""
        assert self.order.release_held() == len(self.held)
        self.settled |= set(self.held.values())
        self.held = {}

    @invariant()
    def held_heads_are_counted(self):
        if hasattr(self, "order"):
            assert self.order.held == len(self.held)
            assert self.order.gauges(self.now)["groups_held"] == len(self.held)

    @rule(back=st.integers(0, 3))
    def purge(self, back):
        # The purge point is the log's end when the tracker took it; the dispatcher may
        # have read a few records sent after it (``back``) before it hears of the purge.
        point = max(0, self.next_offset - back)
        gone = {m for ids in self.sent.values() for m in ids
                if m not in self.settled and m not in self.purged and self.record_of[m] < point}
        self.order.purge_below(point)
        self.purged |= gone  # the tracker forgot them: no ack, release or redrive comes
        self.in_flight = {o: v for o, v in self.in_flight.items() if v[0] not in gone}
        self.away = [a for a in self.away if a[0] not in gone]
        self.held = {g: m for g, m in self.held.items() if m not in gone}

    @invariant()
    def a_group_is_at_one_consumer(self):
        where: dict[bytes, int] = {}
        for _, group, consumer in [*self.in_flight.values(), *[(a[0], a[1], a[3]) for a in self.away]]:
            assert where.setdefault(group, consumer) == consumer, f"group {group!r} at two consumers"
        # a message that went away stays in flight until it is read again (or settled)
        assert set(self.order.in_flight()) == set(self.in_flight) | {o for _, _, o, _ in self.away}

    @invariant()
    def a_head_is_no_older_than_the_first_record(self):
        # The age was now - 0 (the clock itself) once a run's head settled with the next at a consumer.
        if hasattr(self, "order"):
            assert self.order.gauges(self.now)["oldest_head_age_ms"] <= self.now - START_MS

    @invariant()
    def state_only_for_active_groups(self):
        active = {g for g in self.groups
                  if any(m not in self.settled and m not in self.purged for m in self.sent[g])}
        assert len(self.order) <= len(active)

    def teardown(self):
        # Drain: everything comes back and is acked; every unheld message is handed out in order.
        if not hasattr(self, "order"):
            return
        for _ in range(10_000):
            while self._heads_at_consumers():
                self.ack(0)
            self.give_back_rest()
            while self.away:
                self.republish(0)
            self.take(100, 0, 0, 3)  # with every check of a take
            if not self.in_flight:
                break
        for group, ids in self.sent.items():
            if group in self.held:
                continue
            assert all(m in self.settled or m in self.purged for m in ids), f"group {group!r} stuck"
        assert len(self.order) == len(self.held)


OrderedQueue.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
test_ordered_queue = OrderedQueue.TestCase


@settings(max_examples=200, deadline=None)
@given(groups=st.lists(st.integers(0, 999), min_size=1, max_size=400), n=st.integers(1, 64))
def test_many_groups_hand_out_in_send_order_and_leave_no_state(groups, n):
    order = GroupOrder()
    sent: dict[int, list[int]] = {}
    for offset, g in enumerate(groups):
        order.offer(offset, str(offset), str(g).encode(), 0)
        sent.setdefault(g, []).append(offset)
    got: dict[int, list[int]] = {}
    while True:
        taken = order.take(n, 0)
        if not taken:
            break
        assert len({g for _, g in taken}) == len(taken)
        for offset, g in taken:
            got.setdefault(int(g), []).append(offset)
            assert order.settled(offset)
    assert got == sent
    assert len(order) == 0 and order.waiting_records() == 0


def test_hot_group_does_not_block_others():
    order = GroupOrder()
    for o in range(1000):
        order.offer(o, f"h{o}", b"hot", 0)
    for o in range(1000, 1010):
        order.offer(o, f"c{o}", f"g{o}".encode(), 0)
    taken = order.take(16, 0)
    assert len(taken) == 11  # the hot group's head and every other group's
    assert order.gauges(5) == {"groups_waiting": 0, "groups_in_flight": 11, "groups_held": 0, "oldest_head_age_ms": 5}


def test_read_twice_is_ignored():
    order = GroupOrder()
    assert order.offer(0, "a0", b"a", 0) == "queued"
    assert order.offer(0, "a0", b"a", 0) == "known"
    assert order.take(5, 0) == [(0, b"a")]


def test_gauges_of_waiting_groups_and_head_age():
    order = GroupOrder()
    order.offer(0, "a0", b"a", 100)
    order.offer(1, "b0", b"b", 300)
    order.take(1, 400)  # a's head in flight
    assert order.gauges(1100) == {"groups_waiting": 1, "groups_in_flight": 1, "groups_held": 0, "oldest_head_age_ms": 1000}


def test_the_head_age_after_a_head_settles_is_the_next_heads_not_the_clock():
    order = GroupOrder()
    for i in range(3):
        order.offer(i, f"a{i}", b"a", 1000 + i)
    order.take(3, 1500, run=3, consumer="c")
    order.settled(0)  # a1 is the head now, at the consumer: read at 1001
    assert order.gauges(3000)["oldest_head_age_ms"] == 1999


def test_bad_groups_and_dedup_ids_are_refused():
    assert valid_group(b"") is None and valid_group(None) is None
    assert valid_group(b"x" * (MAX_GROUP_BYTES + 1)) is None
    assert valid_group(b"acct-42") == b"acct-42"
    assert valid_dedup_id(b"y" * 129) is None and valid_dedup_id(b"txn") == b"txn"

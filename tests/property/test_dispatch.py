"""Property tests of the shared-queue dispatcher's rules (kmq.protocol.dispatch), time passed in.

- Reading: whatever the demand steps, chunk sizes, read-ahead bound and credit shortfalls,
  the dispatcher hands out every record of every queue exactly once, in offset order.
- Credit: a consumer never holds, nor has on its way, more than it asked for, whatever the
  order in which deliveries arrive, acks happen and credits travel.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kmq.protocol.chunk import record_size
from kmq.protocol.dispatch import Roster, Want, hand_out
from kmq.protocol.lookahead import Lookahead
from kmq.protocol.markers import Credit
from tests.fake_records import Rec


def credit(consumer, free, epoch=0, seq=0, queue="q", lease_ms=5000):
    return Credit(queue, consumer, 0, epoch, seq, free, lease_ms, 30000)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.sampled_from([b"a", b"b", b"c", b"x"]), max_size=200),
       gaps=st.lists(st.integers(1, 3), min_size=200, max_size=200),
       sizes=st.lists(st.integers(0, 30), min_size=200, max_size=200),
       header_sizes=st.lists(st.integers(-1, 40), min_size=200, max_size=200),
       steps=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 7), st.integers(1, 40),
                                st.booleans(), st.booleans()), min_size=1, max_size=300),
       bound=st.integers(1, 50), max_bytes=st.integers(0, 400), max_index=st.integers(1, 100))
def test_every_record_of_every_queue_is_handed_out_once_in_order(keys, gaps, sizes, header_sizes, steps,
                                                                 bound, max_bytes, max_index):
    """The reader's loop (QueueReader.read) over a log with gaps: per-queue and byte bounds
    of any size (headers counted), queues with and without consumers, credit taken
    elsewhere meanwhile."""
    log, off = [], 0
    for k, g, n, h in zip(keys, gaps, sizes, header_sizes):
        log.append(Rec(off, k, n, headers=None if h < 0 else [("h", b"x" * h)] * (1 + h % 2)))
        off += g  # offsets may have gaps (transaction markers)
    ahead = Lookahead(max_records=bound, max_bytes=max_bytes, max_index=max_index)
    position = 0
    cursors = {q: 0 for q in "abc"}
    out = {q: [] for q in "abc"}
    rosters = {q: Roster(epoch=1) for q in "abc"}
    for q in "abc":
        rosters[q].credit(credit("c-" + q, 0, queue=q), now_ms=0)

    def read(chunk):
        nonlocal position
        recs = [r for r in log if position <= r.offset()][:chunk]
        position = recs[-1].offset() + 1 if recs else position
        return recs

    final = [(q, 10_000, 1_000, False, True) for q in "abc" for _ in range(3)]
    for q, demand, chunk, short, kept_all in steps + final:
        roster = rosters[q]
        roster.credit(credit("c-" + q, demand + roster.slots["c-" + q].outstanding(), queue=q), now_ms=0)
        if short:  # the credit is taken elsewhere between the read and the share
            roster.slots["c-" + q].available = max(0, demand // 2)
        wants = {q.encode(): Want(q, cursors[q], demand)}
        wanting, seek = ahead.serve(wants)
        if seek is not None:
            position = seek
        if wanting:
            ahead.take(read(chunk), {b"a", b"b", b"c"} if kept_all else set(), wants)
        w = wants[q.encode()]
        for _slot, _seq, run in hand_out(w, roster):
            out[q] += [r.offset() for r in run]
        cursors[q] = w.cursor
        ahead.trim(q.encode(), w.cursor)
        roster.slots["c-" + q].unconfirmed.clear()  # the consumer received and acked it all
        assert sum(qa.bytes for qa in ahead.queues.values()) <= max_bytes
        assert all(qa.bytes == sum(map(record_size, qa.records)) for qa in ahead.queues.values())
        assert all(len(qa.records) <= bound for qa in ahead.queues.values())
    for q in "abc":
        want = [r.offset() for r in log if r.key() == q.encode()]
        assert out[q] == want, f"queue {q}: handed out {out[q]}, wanted {want}"


def test_a_neighbours_backlog_does_not_hold_a_small_queue_up():
    """A flood of ``f`` with a few ``p`` records among it, read while only p had demand:
    f keeps its first 100, p keeps all of its own, and p's next credit is served from
    what was held, with no read going back into the flood."""
    log = [Rec(o, b"p" if o % 500 == 250 else b"f") for o in range(5000)]
    ahead = Lookahead(max_records=100)
    p = Want("p", 0, 1)
    assert ahead.serve({b"p": p}) == (True, 0)
    ahead.take(log, {b"f"}, {b"p": p})
    assert [r.offset() for r in p.taken] == [250] and ahead.position == 5000
    ahead.trim(b"p", p.cursor)
    f_held = ahead.queues[b"f"]
    assert (len(f_held.records), f_held.end) == (100, 100)  # the flood is complete to 100 only
    p = Want("p", p.cursor, 100)
    assert ahead.serve({b"p": p}) == (True, None)  # p's rest was held; it needs the head only
    assert [r.offset() for r in p.taken] == list(range(750, 5000, 500)) and p.cursor == 5000
    f = Want("f", 0, 1000)
    wanting, seek = ahead.serve({b"f": f, b"p": Want("p", 5000, 1)})
    assert len(f.taken) == 100 and seek == 100  # only the flood goes back, for itself


class CreditVsConsumer(RuleBasedStateMachine):
    """One dispatcher roster and two consumers whose credits and deliveries travel with delay."""

    M = 7  # max_in_flight of each consumer

    @initialize()
    def setup(self):
        self.roster = Roster(epoch=9)
        self.now = 0
        self.held = {"c1": 0, "c2": 0}
        self.on_way = {"c1": deque(), "c2": deque()}     # deliveries sent, not received: (seq, n)
        self.credits = {"c1": deque(), "c2": deque()}    # credits sent, not yet at the roster
        self.seen_seq = {"c1": 0, "c2": 0}
        self.last_applied = {"c1": None, "c2": None}  # a retry may land it again, adjacent
        for c in self.held:
            self._ask(c)

    def _ask(self, c):
        self.credits[c].append(Credit("q", c, 0, 9 if self.seen_seq[c] else 0, self.seen_seq[c],
                                      self.M - self.held[c], 5000, 30000))

    @rule(n=st.integers(1, 20))
    def dispatch(self, n):
        for slot, k in self.roster.share(n):
            seq = self.roster.sent(slot, k)
            self.on_way[slot.consumer_id].append((seq, k))

    @rule(c=st.sampled_from(["c1", "c2"]))
    @precondition(lambda self: any(self.credits.values()))
    def credit_arrives(self, c):
        if self.credits[c]:
            self.last_applied[c] = self.credits[c].popleft()
            self.roster.credit(self.last_applied[c], self.now)

    @rule(c=st.sampled_from(["c1", "c2"]))
    def credit_lands_again(self, c):
        # CREDITs go out without idempotence (MarkerWriter.send_soft): a retried record can
        # land twice in a row in the log; deliveries may be sent between the two copies.
        if self.last_applied[c] is not None:
            self.roster.credit(self.last_applied[c], self.now)

    @rule(c=st.sampled_from(["c1", "c2"]))
    def delivery_arrives(self, c):
        if self.on_way[c]:
            seq, k = self.on_way[c].popleft()
            self.held[c] += k
            self.seen_seq[c] = seq

    @rule(c=st.sampled_from(["c1", "c2"]), k=st.integers(1, 7))
    def ack_and_ask(self, c, k):
        self.held[c] -= min(k, self.held[c])
        self._ask(c)

    @invariant()
    def never_more_than_asked(self):
        if hasattr(self, "held"):
            for c in self.held:
                assert self.held[c] + sum(k for _, k in self.on_way[c]) <= self.M


CreditVsConsumer.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
test_a_consumer_never_gets_more_than_it_asked_for = CreditVsConsumer.TestCase


def test_a_consumer_that_stops_asking_is_dropped_after_its_lease():
    r = Roster(epoch=1)
    r.credit(credit("c", 5, lease_ms=1000), now_ms=0)
    assert r.expire(999) == [] and r.demand() == 5
    assert r.expire(1000) == ["c"] and r.demand() == 0


def test_a_goodbye_removes_the_consumer_at_once():
    r = Roster(epoch=1)
    r.credit(credit("c", 5), now_ms=0)
    assert r.credit(credit("c", 0, lease_ms=0), now_ms=1) is None and not r.slots


def test_shares_are_fair_and_rotate():
    r = Roster(epoch=1)
    for c in ("a", "b", "c"):
        r.credit(credit(c, 10), now_ms=0)
    first = [(s.consumer_id, k) for s, k in r.share(6)]
    assert sorted(k for _, k in first) == [2, 2, 2]
    second = [s.consumer_id for s, _ in r.share(3)]
    assert second != [c for c, _ in first][:3]  # another consumer goes first


def test_a_delivery_unconfirmed_for_the_consumers_visibility_timeout_counts_no_more():
    # A consumer whose CREDITs never name a delivery (a forged lane header set its receipt
    # back: an audit's consumer got 0 of 160 in 150 s) is counted against for one visibility
    # timeout at most: what the delivery carried has lapsed at the tracker by then.
    r = Roster(epoch=9)
    slot = r.credit(Credit("q", "c", 0, 9, 0, 10, 5000, 1000), now_ms=0)
    r.sent(slot, 10)
    assert r.credit(Credit("q", "c", 0, 9, 0, 10, 5000, 1000), now_ms=999).available == 0
    assert r.credit(Credit("q", "c", 0, 9, 0, 10, 5000, 1000), now_ms=1000).available == 10
    assert r.lapsed_unconfirmed == 1
    r.expire(1500)
    later = r.sent(slot, 4)  # stamped with the roster's latest time
    assert r.credit(Credit("q", "c", 0, 9, 0, 10, 5000, 1000), now_ms=2499).available == 6
    assert r.credit(Credit("q", "c", 0, 9, later, 10, 5000, 1000), now_ms=2499).available == 10

"""Property tests of an ordered queue across dispatcher failovers (docs/ordering.md, "Failover").

The pure parts a tracker runs, wired as the agents wire them: the state machine
(``PartitionState``: ordered ACQUIREs mark offsets handed out, FLOORs move the cursor and
the bitmap, ACKs settle) and the dispatcher's ordered queues (``agents.dispatch.ordered``: feed,
take, the durable floor, and after a BEGIN ``recover`` from ``handed_outs()``). The model:
a log of records (offset, id, group); consumers ack, or release / time out (the tracker
republishes a copy with the same id at the log's end and forgets the entry; the
dispatcher is told nothing). At any step the dispatcher may die: a successor begins from
the table alone, reads to the log's end as of its BEGIN before handing out, and meanwhile
the old consumers' acks reach it. Whatever the interleaving:

- nothing acked is handed out again;
- a group is handed out only when none of it is in flight (the predecessor's count), as
  its next messages not acked, in send order (a run: several, for one consumer);
- everything is acked in the end (no group stuck after a failover).
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import envelope as V
from kmq.protocol import handed as H
from kmq.protocol import entries as E
from kmq.protocol import markers as M
from kmq.protocol.dispatch import Roster, Want
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore

Q = "q"
KEY = (0, Q, 0)
WINDOW_MS = 300_000


class Rec:
    def __init__(self, offset: int, msg_id: str, group: bytes):
        self._o, self._h = offset, [(V.ID, msg_id.encode()), (V.GROUP, group)]

    def offset(self):
        return self._o

    def headers(self):
        return self._h

    def timestamp(self):
        return (1, 1000)

    def __len__(self):  # the value's bytes, as a confluent-kafka Message answers
        return 0


class FailingOver(RuleBasedStateMachine):
    """A dispatcher, its tracker's state and its consumers, against a model of each group."""

    @initialize(n_groups=st.integers(1, 4), gap=st.integers(0, 3))
    def setup(self, n_groups, gap):
        self.groups = [b"a", b"b", b"c", b"x" * 128][:n_groups]
        self.gap = gap          # other queues' records between ours (offsets not ours)
        self.log: list[Rec | None] = []
        self.state = PartitionState(MemoryStore())
        self.epoch = 0
        self.sent: dict[bytes, list[str]] = {g: [] for g in self.groups}
        self.acked: set[str] = set()
        self.out: dict[str, int] = {}   # id -> offset handed out, not acked nor republished
        self.holder: dict[str, str] = {}  # id -> the consumer it was handed to
        self.range_of: dict[str, M.RangeRef] = {}  # id -> its delivery's range
        self.gone: dict[str, tuple[str, int]] = {}  # id -> (consumer that gave it back, copy offset)
        self.next_id = 0
        self.now = 0
        self._begin()

    def _begin(self) -> None:
        """A dispatcher begins: BEGIN applied, then cursors and hand-outs from the table."""
        self.epoch += 1
        self.state.apply(M.Begin(self.epoch), self.now)
        self.oq = OrderedQueues()
        self.cursor = self.state.cursors().get((Q, 0), 0)
        got = self.state.handed_outs().get((Q, 0))
        if got is not None:
            self.oq.recover(KEY, got[0], got[1], len(self.log))

    def _append(self, msg_id: str, group: bytes) -> None:
        self.log.extend([None] * self.gap)
        self.log.append(Rec(len(self.log), msg_id, group))

    @rule(g=st.integers(0, 3))
    def send(self, g):
        group = self.groups[g % len(self.groups)]
        msg_id = f"m{self.next_id}"
        self.next_id += 1
        self.sent[group].append(msg_id)
        self._append(msg_id, group)

    @rule(k=st.integers(1, 6))
    def read(self, k):
        recs = [r for r in self.log[self.cursor:self.cursor + k] if r is not None]
        self.oq.feed(KEY, recs, WINDOW_MS, self.now)
        self.cursor = min(len(self.log), self.cursor + k)

    def _settle(self, msg_id: str, o: int) -> None:
        rng = self.range_of[msg_id]
        applied = self.state.apply(M.Ack(rng, 1 << (o - rng.start)), self.now)
        assert applied is None or applied.what not in ("unknown-range", "late"), (msg_id, rng, applied)

    def _pending(self, group: bytes) -> list[str]:
        return [i for i in self.sent[group] if i not in self.acked]

    def _heads_out(self) -> list[str]:
        """Messages a consumer may settle now: its group's next, held by a consumer (a
        consumer handles a run one at a time, in order)."""
        return sorted(p[0] for p in map(self._pending, self.groups) if p and p[0] in self.out)

    @rule(n=st.integers(1, 4), consumers=st.integers(1, 2))
    def hand_out(self, n, consumers):
        """A dispatch round as the dispatcher does it: each consumer's credit ``n``, runs and
        runs going on, the round's ACQUIREs in its order, then its FLOOR."""
        self.now += 1
        roster = Roster(1)
        for c in range(consumers):
            roster.credit(M.Credit(Q, f"c{c}", 0, 0, 0, n, 30_000, 30_000), self.now)
        busy = {}
        for msg_id, o in self.out.items():
            busy[self.log[o].headers()[1][1]] = self.holder[msg_id]
        runs = self.oq.hand_out(KEY, Want(Q, self.cursor, n, []), roster, WINDOW_MS, self.now)
        by_group: dict[bytes, list[str]] = {}
        for slot, _, part in runs:
            for rec in part:
                o = rec.offset()
                msg_id, group = rec.headers()[0][1].decode(), rec.headers()[1][1]
                assert msg_id not in self.acked, f"{msg_id} handed out again after its ack"
                assert busy.get(group, slot.consumer_id) == slot.consumer_id, \
                    f"{msg_id} handed to {slot.consumer_id} while some of its group are at {busy[group]}"
                by_group.setdefault(group, []).append(msg_id)
                self.out[msg_id] = o
                self.holder[msg_id] = slot.consumer_id
            mask = M.offsets_mask(part[0].offset(), [r.offset() for r in part])
            rng = M.RangeRef(Q, 0, part[0].offset(), part[-1].offset() + 1)
            for rec in part:  # the consumer settles by its delivery's range
                self.range_of[rec.headers()[0][1].decode()] = rng
            self.state.apply(M.Acquire(rng, 30_000, mask, self.epoch, True), self.now)
        for group, ids in by_group.items():
            pending = self._pending(group)
            c = self.holder[ids[0]]
            # earlier ones at that consumer, or given back there unseen (a copy not read yet)
            before = [i for i in pending if i not in ids and (
                i in self.out or self.gone.get(i, (None, -1))[0] == c and self.gone[i][1] >= self.cursor)]
            assert ids == pending[len(before):len(before) + len(ids)], \
                f"{ids} overtook an earlier one of their group"
            if any(i in self.gone for i in before):
                # More of a run its consumer gave back (the dispatcher had not read the copy
                # yet): the consumer gives these back too, by the run's id.
                self._give_back(group, ids)
        if runs:
            floor = self.oq.durable_floor(KEY, self.cursor)
            self.state.apply(M.Floor(Q, 0, floor, self.epoch), self.now)

    @precondition(lambda self: self._heads_out())
    @rule(i=st.integers(0, 1 << 16))
    def ack(self, i):
        heads = self._heads_out()
        msg_id = heads[i % len(heads)]
        o = self.out.pop(msg_id)
        self._settle(msg_id, o)
        self.acked.add(msg_id)
        self.oq.settled(KEY, [o])

    @precondition(lambda self: self._heads_out())
    @rule(i=st.integers(0, 1 << 16), reverse=st.booleans())
    def release(self, i, reverse):
        """Released or timed out with the rest of its run (the consumer gives it back): the
        tracker writes copies at the end, then forgets the entries."""
        heads = self._heads_out()
        group = self.log[self.out[heads[i % len(heads)]]].headers()[1][1]
        ids = [m for m in self.sent[group] if m in self.out]
        self._give_back(group, list(reversed(ids)) if reverse else ids)

    def _give_back(self, group: bytes, ids: list[str]) -> None:
        for msg_id in ids:
            o = self.out.pop(msg_id)
            self._append(msg_id, group)
            self.gone[msg_id] = (self.holder[msg_id], len(self.log) - 1)
            # Republished, then forgotten (as an ack would remove it); the dispatcher hears nothing.
            self._settle(msg_id, o)

    @rule()
    def fail_over(self):
        self._begin()

    @invariant()
    def bitmap_bounded(self):
        h = self.state.handed_out(Q, 0)
        assert h is None or h.mask.bit_length() <= H.MAX_HANDED_BITS

    def teardown(self):
        # Drain: consumers ack whatever they hold; every message is acked in the end.
        for _ in range(20 * (len(self.log) + 2)):
            if len(self.acked) == self.next_id:
                return
            if self._heads_out():
                self.ack(0)
            self.read(8)
            self.hand_out(4, 2)
        pending = {g: [i for i in ids if i not in self.acked] for g, ids in self.sent.items()}
        raise AssertionError(f"stuck after failover: {pending}")


FailingOver.TestCase.settings = settings(max_examples=250, stateful_step_count=50, deadline=None)
test_ordered_queue_across_failovers = FailingOver.TestCase


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("mark"), st.integers(0, 3 * H.MAX_HANDED_BITS), st.integers(1, (1 << 64) - 1)),
    st.tuples(st.just("mark-wide"), st.integers(0, 3 * H.MAX_HANDED_BITS), st.just((1 << M.MAX_RANGE_LEN) - 1)),
    st.tuples(st.just("floor"), st.integers(0, 3 * H.MAX_HANDED_BITS), st.just(0))), max_size=40))
def test_handed_out_bitmap_matches_a_set_and_stays_bounded(ops):
    """Against a set of offsets: every offset the bitmap says handed out was, every one handed
    out at or above ``base`` and the floor is known, it never exceeds MAX_HANDED_BITS, and
    it survives its codec; adversarial spans (a full range, floors far apart)."""
    h, model, floor = H.HandedOut(0), 0, 0   # model: bit o for offset o handed out
    for kind, at, mask in ops:
        if kind == "floor":
            h = h.advance(at)
            floor = max(floor, at)
        else:
            h = h.mark(at, mask)
            model |= mask << at
        model &= ~((1 << floor) - 1)
        assert h.mask.bit_length() <= H.MAX_HANDED_BITS
        assert h.base >= floor or not h.mask
        assert h.mask << h.base == model & ~((1 << h.base) - 1)
        assert E.decode_handed(E.encode_handed(h)) == h


def test_handed_out_codec_is_strict():
    good = E.encode_handed(H.HandedOut(5, 0b1011))
    for bad in (b"", good[:-1], good + b"\0", b"\x02" + good[1:],
                good[:9] + (H.MAX_HANDED_BITS // 8 + 1).to_bytes(4, "big") + good[13:]):
        try:
            E.decode_handed(bad)
        except ValueError:
            continue
        raise AssertionError(f"decoded {bad!r}")


@settings(max_examples=200, deadline=None)
@given(marks=st.lists(st.tuples(st.integers(0, 10**15), st.integers(1, (1 << 64) - 1)), min_size=1, max_size=8))
def test_handed_out_bitmap_at_far_offsets_stays_bounded(marks):
    """ACQUIREs anywhere (a forged one at offset 10**12 built a 10**12-bit int before: the
    markers agent raised MemoryError): bounded, and what it keeps was handed out."""
    h, handed = H.HandedOut(0), set()
    for at, mask in marks:
        h = h.mark(at, mask)
        handed |= {at + i for i in range(mask.bit_length()) if mask >> i & 1}
        assert h.mask.bit_length() <= H.MAX_HANDED_BITS
        assert set(h.offsets()) <= handed
        top = max(handed)
        assert h.handed(top)  # the highest is always kept

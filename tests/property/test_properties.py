"""Round trips of both codecs, and replays of marker records are harmless."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kmq.protocol import entries as E
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import QUEUE_NAME_RE
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore

queues = st.from_regex(QUEUE_NAME_RE, fullmatch=True)


@st.composite
def ranges(draw):
    start = draw(st.integers(0, 2**40))
    length = draw(st.integers(1, 300))
    return M.RangeRef(draw(queues), draw(st.integers(0, 2**32 - 1)), start, start + length)


@st.composite
def masked(draw, cls, *extra):
    r = draw(ranges())
    mask = draw(st.integers(1, r.full_mask))
    return cls(r, mask, *[draw(e) for e in extra])


timeouts = st.integers(0, M.MAX_TIMEOUT_MS)
u32 = st.integers(0, 2**32 - 1)
markers = st.one_of(
    st.builds(lambda r, t, d: M.Start(r, t, d.draw(st.integers(1, r.full_mask))), ranges(), timeouts,
              st.data()),
    masked(M.Ack), masked(M.Extend, timeouts), masked(M.Release, st.integers(-1, M.MAX_DELAY_MS), st.booleans()),
    masked(M.Reject, st.text(max_size=50)),
    st.builds(M.Schedule, queues, st.text(min_size=1, max_size=30), st.integers(0, M.MAX_TIME_MS), st.binary(max_size=50),
              st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=10)), max_size=3).map(tuple)),
    st.builds(M.Tick, st.integers(0, M.MAX_TIME_MS)), st.builds(M.Purge, queues),
    st.builds(M.Credit, queues, st.text(min_size=1, max_size=40), u32, st.integers(0, 2**64 - 1),
              st.integers(0, 2**64 - 1), st.integers(0, M.MAX_CREDIT), timeouts, timeouts),
    st.builds(lambda r, t, d, e: M.Acquire(r, t, d.draw(st.integers(1, r.full_mask)), e), ranges(), timeouts,
              st.data(), st.integers(0, 2**64 - 1)),
    st.builds(M.Begin, st.integers(0, 2**64 - 1)),
    st.builds(M.Floor, queues, u32, st.integers(0, 2**63 - 1), st.integers(0, 2**64 - 1)),
)


@given(st.lists(markers, min_size=1, max_size=8))
def test_decode_of_encode_is_identity(batch):
    assert marker_codec.decode(marker_codec.encode(batch)) == batch


@given(st.binary(max_size=200))
def test_random_bytes_never_crash_the_decoder(data):
    try:
        marker_codec.decode(data)
    except Exception as exc:  # only the one documented error is allowed
        assert type(exc).__name__ == "MarkerDecodeError"


groups = st.builds(E.Group, st.integers(0, 2**60), st.sampled_from(list(E.Cause)), st.text(max_size=20),
                   st.integers(1, 2**300))


@given(st.builds(E.InFlight, st.integers(0, 2**60), u32, st.lists(groups, max_size=5),
                 st.integers(-1, 2**60)))
def test_inflight_entries_round_trip(entry):
    assert E.decode_inflight(E.encode_inflight(entry)) == entry


@given(st.builds(E.Scheduled, st.integers(0, 2**60), st.binary(max_size=100),
                 st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=10)), max_size=3).map(tuple),
                 st.integers(-1, 2**60)))
def test_scheduled_entries_round_trip(entry):
    assert E.decode_scheduled(E.encode_scheduled(entry)) == entry


@settings(max_examples=200)
@given(st.data())
def test_replaying_a_suffix_of_the_marker_log_never_resurrects_acked_offsets(data):
    """The tracker re-reads markers after a crash: duplicate STARTs/ACKs are harmless."""
    r = M.RangeRef("q", 0, 0, 16)
    log = [M.Start(r, 1000, r.full_mask)]
    for _ in range(data.draw(st.integers(0, 6))):
        log.append(M.Ack(r, data.draw(st.integers(1, r.full_mask))))
    acked = 0
    for m in log[1:]:
        acked |= m.mask
    s = PartitionState(MemoryStore())
    for t, m in enumerate(log):
        s.apply(m, t)
    cut = data.draw(st.integers(0, len(log) - 1))
    for t, m in enumerate(log[cut:], start=len(log)):  # the replay
        s.apply(m, t)
    due = s.due(10**9)
    expired = 0
    for d in due:
        expired |= d.mask
    assert expired & acked == 0
    assert expired == r.full_mask & ~acked  # and nothing unacked is forgotten


class LoggedStore(MemoryStore):
    """A MemoryStore that records its writes, to replay any prefix of them (a crash)."""

    def __init__(self):
        super().__init__()
        self.log = []

    def put(self, key, value):
        self.log.append(("put", key, value))
        super().put(key, value)

    def delete(self, key):
        self.log.append(("delete", key, None))
        super().delete(key)

    def index_put(self, key):
        self.log.append(("index_put", key, None))
        super().index_put(key)

    def index_delete(self, key):
        self.log.append(("index_delete", key, None))
        super().index_delete(key)


def _apply_log(ops) -> MemoryStore:
    s = MemoryStore()
    for op, key, value in ops:
        if op == "put":
            MemoryStore.put(s, key, value)
        elif op == "delete":
            MemoryStore.delete(s, key)
        elif op == "index_put":
            MemoryStore.index_put(s, key)
        else:
            MemoryStore.index_delete(s, key)
    return s


range_ops = st.sampled_from(["ack", "extend", "release", "reject"])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_crash_at_any_write_then_replay_loses_nothing(data):
    """Kill the tracker after any prefix of its changelog writes; the new owner
    replays the markers after the last commit: every unacked offset is still due."""
    r1, r2 = M.RangeRef("q", 0, 0, 6), M.RangeRef("q", 0, 6, 9)
    events = [M.Start(r1, 1000, r1.full_mask), M.Start(r2, 2000, r2.full_mask)]
    for _ in range(data.draw(st.integers(0, 6))):
        r = data.draw(st.sampled_from([r1, r2]))
        mask = data.draw(st.integers(1, r.full_mask))
        kind = data.draw(range_ops)
        events.append({"ack": M.Ack(r, mask), "extend": M.Extend(r, mask, 700),
                       "release": M.Release(r, mask, 300), "reject": M.Reject(r, mask, "x")}[kind])
    logged = LoggedStore()
    machine = PartitionState(logged)
    marks = []  # log length after each event
    for t, m in enumerate(events):
        machine.apply(m, 10 * t)
        marks.append(len(logged.log))
    committed = data.draw(st.integers(0, len(events)))  # events whose markers offset was committed
    cut = data.draw(st.integers(marks[committed - 1] if committed else 0, len(logged.log)))
    recovered = PartitionState(_apply_log(logged.log[:cut]))
    for t, m in enumerate(events[committed:], start=100):  # the replay
        recovered.apply(m, 10 * t)
    # Invariant: every entry's indexed key exists.
    for key, raw in recovered.store.entries.items():
        if not E.is_range_key(key):
            continue
        ik = E.index_key(E.decode_inflight(raw).indexed_ms, key)
        assert ik in recovered.store.index, "an entry lost its index key"
    # Nothing lost: drive time far ahead; what comes due is exactly what the
    # uncrashed machine would due, and no acked offset (the last ack wins).
    def due_offsets(state):
        out, now = set(), 10**9
        for _ in range(5):
            ds = state.due(now)
            for d in ds:
                if hasattr(d, "range"):
                    out |= {(d.range, o) for o in M.mask_offsets(d.range.start, d.mask)}
            state.settle(ds)
        return out
    assert due_offsets(recovered) == due_offsets(machine)

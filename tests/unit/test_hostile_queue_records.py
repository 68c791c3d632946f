"""Hostile records on the topics the SDK and the dispatcher read besides the markers: the pure
decisions that keep one from stopping a partition, a consumer or a dispatch round."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import example, given, settings, strategies as st

from agents.dispatch.lanes import delivery_of
from kmq.consumer.lane_reader import LaneRecords
from kmq.kafka.batch_skips import BatchSkips
from kmq.protocol import deliveries as D
from kmq.protocol import markers as M
from kmq.protocol.batch_end import BatchEnd
from kmq.protocol.dispatch import ConsumerSlot
from kmq.protocol.lookahead import Lookahead
from tests.fake_records import ConfigRec, Rec
from tests.unit.test_lane_records import ME, LaneRec, copy, header


def find_end(base: int, n: int, limit: int | None, next_bad: int | None = None) -> BatchEnd:
    """Drive a search against a partition whose batch ``[base, base + n)`` cannot be read
    (and, if ``next_bad``, another one from there on)."""
    search = BatchEnd(base, limit)
    while search.end is None:
        x = search.probe
        assert base < x and (limit is None or x < limit)  # never past what is known
        if x < base + n:
            search.observe(inside=True)
        elif next_bad is not None and x >= next_bad:
            search.observe(inside=False, next_batch=next_bad)
        else:
            search.observe(inside=False)
        assert search.probes <= 2 * math.ceil(math.log2(n + 1)) + 2
    return search


@given(base=st.integers(0, 1 << 50), n=st.integers(1, 1 << 20), slack=st.none() | st.integers(0, 1 << 30))
@example(base=0, n=1, slack=0)
@example(base=7, n=3, slack=None)
def test_the_end_of_an_unreadable_batch_is_found_exactly_in_logarithmic_seeks(base, n, slack):
    limit = None if slack is None else base + n + slack
    assert find_end(base, n, limit).end == base + n


@given(n=st.integers(1, 5000), gap=st.integers(0, 5000))
def test_a_second_unreadable_batch_after_the_first_is_not_skipped_with_it(n, gap):
    search = find_end(100, n, None, next_bad=100 + n + gap)
    assert search.end == 100 + n


def test_a_limit_at_or_below_the_batch_is_refused():
    with pytest.raises(ValueError):
        BatchEnd(10, 10)


def test_a_reader_skips_a_batch_it_cannot_read_and_counts_it():
    skips = BatchSkips("test reader")
    assert skips.step(3, None, past=True) is None  # nothing unreadable: nothing to do
    seek = skips.step(3, 40, past=False, error="bad compression")
    while skips.searching(3):
        # batch [40, 45): a fetch from inside it fails again at 40; from past it, records
        seek = skips.step(3, 40, past=False) if seek < 45 else skips.step(3, None, past=True)
    assert seek == 45 and (skips.batches, skips.offsets) == (1, 5)
    assert skips.step(3, None, past=False) is None


def test_a_probe_that_brought_nothing_yet_waits():
    skips = BatchSkips("test reader")
    first = skips.step(0, 0, past=False)
    assert skips.step(0, None, past=False) is None and skips.searching(0)
    skips.forget(0)
    assert not skips.searching(0) and first == 1


# -- lanes: anyone may write one ---------------------------------------------------------

def raw_header(partition: int = 0, timeout_ms: int = 30_000, queue: bytes = b"jobs") -> bytes:
    return (struct.pack(">BBQQI", 1, D.COPY, 1, 1, timeout_ms) + struct.pack(">H", len(queue)) + queue
            + struct.pack(">Iqq", partition, 10, 12) + struct.pack(">I", 0))


@given(st.binary(max_size=300))
@example(raw_header(partition=(1 << 32) - 1))
def test_decoding_any_bytes_gives_a_delivery_or_a_delivery_decode_error(data):
    try:
        D.decode(data)
    except D.DeliveryDecodeError:
        pass


@pytest.mark.parametrize("bad", [raw_header(partition=1 << 31), raw_header(partition=(1 << 32) - 1),
                                 raw_header(timeout_ms=M.MAX_TIMEOUT_MS + 1),
                                 raw_header(timeout_ms=(1 << 32) - 1), raw_header(queue=b"\xff\xfe")],
                         ids=["partition-2**31", "partition-2**32-1", "timeout-12h+1ms", "timeout-49-days",
                              "queue-not-utf8"])
def test_a_header_no_dispatcher_writes_is_refused(bad):
    # A reference to partition 2**31 raised OverflowError out of every receive (librdkafka's
    # partitions are int32); a 49-day timeout held every later reference back as long.
    with pytest.raises(D.DeliveryDecodeError):
        D.decode(bad)
    assert D.decode(raw_header()).range == M.RangeRef("jobs", 0, 10, 12)


def test_a_forged_or_foreign_header_in_the_middle_of_a_delivery_is_counted_and_the_delivery_goes_on():
    lane = LaneRecords(ME, "jobs", lane=0)
    forged = [LaneRec(D.header_key(ME), raw_header(partition=1 << 31)), header(ME, 5, 1, queue="other")]
    out = lane.take([header(ME, 1, 2), copy(ME), *forged, copy(ME)])
    assert [(g.delivery.seq, len(g.copies)) for g in out] == [(1, 2)]  # not cut short by them
    assert lane.malformed == 2


# -- the dispatcher: a record no lane takes ----------------------------------------------

def test_a_run_with_a_record_too_large_to_copy_is_referred_unless_it_must_be_copied():
    ahead = Lookahead()
    ahead.plan([0])
    # Other queues' records dominate the range: without the size check it would be copied.
    recs = [Rec(0, b"q", 10), Rec(1, b"other", 3_000_000), Rec(2, b"q", 2_000_000), Rec(3, b"other", 3_000_000)]
    ahead.add(recs, {b"q", b"other"})
    run = [recs[0], recs[2]]
    slot = ConsumerSlot("c" * 32, 0, 30_000)
    assert delivery_of(run, "q", 0, 1, slot, 1, ahead, max_copy_bytes=1_000_000).delivery.kind == D.REFERENCE
    assert delivery_of(run, "q", 0, 1, slot, 1, ahead, copy=True, max_copy_bytes=1_000_000).delivery.kind == D.COPY
    small = [Rec(0, b"q", 10), Rec(2, b"q", 10)]
    assert delivery_of(small, "q", 0, 1, slot, 1, ahead, max_copy_bytes=1_000_000).records == small


class ErrRec(LaneRec):
    """An error librdkafka hands back in place of a record (at a batch's first offset)."""

    def __init__(self, code: int, offset: int) -> None:
        super().__init__(None, None, offset)
        from confluent_kafka import KafkaError
        self._err = KafkaError(code)

    def error(self):
        return self._err


def test_a_lane_batch_that_cannot_be_read_is_noted_for_the_reader_to_skip():
    from confluent_kafka import KafkaError
    lane = LaneRecords(ME, "jobs", lane=0)
    assert lane.take([header(ME, 1, 1), copy(ME), ErrRec(KafkaError._BAD_COMPRESSION, 17)])[0].delivery.seq == 1
    assert lane.unreadable == 17 and lane.fatal is None


# -- the dispatcher's reader, over a modelled librdkafka consumer ------------------------

class StuckLog:
    """librdkafka over one partition whose offsets ``bad`` are a batch it cannot read: a fetch
    from inside it returns its error at its first offset (again and again), else records."""

    def __init__(self, end: int, bad: range) -> None:
        from confluent_kafka import KafkaError
        self.end, self.bad, self.pos, self.eof_said, self.seeks = end, bad, None, False, 0
        self._err = KafkaError(KafkaError._BAD_COMPRESSION)
        self._eof = KafkaError(KafkaError._PARTITION_EOF)

    def incremental_assign(self, tps):
        self.pos, self.eof_said = tps[0].offset, False

    def seek(self, tp):
        self.pos, self.eof_said = tp.offset, False
        self.seeks += 1

    def consume(self, n, _timeout):
        out = []
        while self.pos is not None and len(out) < n:
            if self.pos in self.bad:
                out.append(Rec(self.bad.start, None, error=self._err))
                break
            if self.pos >= self.end:
                if not self.eof_said:
                    out.append(Rec(self.end, None, error=self._eof))
                    self.eof_said = True
                break
            out.append(Rec(self.pos, b"q"))
            self.pos += 1
        return out


def reader_over(log: StuckLog):
    from types import SimpleNamespace

    from agents.dispatch.reader import QueueReader
    r = QueueReader.__new__(QueueReader)
    r.settings, r._trace, r._consumer, r.stats = SimpleNamespace(queue_topic="t"), False, log, {}
    r.ahead, r._idle_since, r._assigned, r._ends = {}, {}, set(), {}
    r._unreadable, r._eofs, r._last_error = {}, {}, {}
    r._skips = BatchSkips("queue reader", remember=10)
    return r


@pytest.mark.parametrize("bad", [range(10, 13), range(0, 1), range(10, 2000), range(15, 16)])
def test_the_reader_takes_every_readable_record_around_a_batch_it_cannot_read(bad):
    from kmq.protocol.dispatch import Want
    log = StuckLog(end=16 if bad.stop <= 16 else bad.stop + 3, bad=bad)
    reader = reader_over(log)
    want = Want("q", 0, 10_000)
    for _ in range(100):  # rounds of the dispatcher, each one read
        reader.read({0: {b"q": want}}, set(), False, {0: {b"q"}})
    readable = [o for o in range(log.end) if o not in bad]
    assert [r.offset() for r in want.taken] == readable  # none lost, none twice
    assert want.cursor == log.end
    assert reader.stats == {"unreadable-batches": 1, "unreadable-offsets": len(bad)}
    assert log.seeks <= 2 * math.ceil(math.log2(len(bad) + 1)) + 3


# -- forged kmq headers ------------------------------------------------------------------

class HeaderRec:
    """A queue record as the dispatcher's ordered-queue code asks it."""

    def __init__(self, offset: int, headers: list) -> None:
        self._o, self._h = offset, headers

    def offset(self):
        return self._o

    def headers(self):
        return self._h

    def timestamp(self):
        return (1, 1_000 + self._o)


def test_a_huge_kmq_id_is_kept_by_its_digest_and_the_same_for_its_redelivery():
    from kmq.protocol import envelope
    huge = b"i" * (1 << 20)
    assert envelope.kept_id(huge, 0, 5) == envelope.kept_id(huge, 3, 900)  # a redelivery: same header
    assert len(envelope.kept_id(huge, 0, 5)) < 40
    assert envelope.kept_id(huge + b"x", 0, 5) != envelope.kept_id(huge, 0, 5)
    assert envelope.kept_id(b"abc", 0, 5) == "abc"
    assert envelope.kept_id(None, 2, 7) == envelope.kept_id(b"", 2, 7) == "2:7"


def test_dedup_state_keeps_no_huge_message_ids():
    import gc
    import tracemalloc

    from agents.dispatch.ordered import OrderedQueues
    oq = OrderedQueues()
    recs = [HeaderRec(i, [("kmq.id", bytes([65 + i % 26]) * (1 << 20) + b"%d" % i), ("kmq.dedup-id", b"d%d" % i)])
            for i in range(20)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert oq.drop_duplicates(("m", "q", 0), recs, 300_000) == recs  # 20 distinct sends
        del recs
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1 << 20  # was 20 MiB: every 1 MiB id kept for the dedup window
    dup = HeaderRec(50, [("kmq.id", b"A" * (1 << 20) + b"0"), ("kmq.dedup-id", b"d0")])
    assert oq.drop_duplicates(("m", "q", 0), [dup], 300_000) == []  # still deduplicated


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3),
                           max_leaves=10)
HOSTILE_VALUES = (st.binary(max_size=50) | JSON_VALUES.map(lambda v: json.dumps(v).encode())
                  | JSON_VALUES.map(lambda v: json.dumps({"v": 1, "purged_before": v, "handover": v,
                                                           "backoff": v, "spread": v}).encode()))


@settings(max_examples=300, deadline=None)
@given(value=HOSTILE_VALUES, key=st.sampled_from([b"q", b"!auth", b"!tenant:acme"]))
@example(value=b"1", key=b"q")  # the audit's: every new client failed with AttributeError
@example(value=b'{"v":1,"purged_before":{"0":1e400}}', key=b"q")  # OverflowError
@example(value=b"[" * 100_000, key=b"q")  # RecursionError
@example(value=b'{"v":2,"kdf":"scrypt","n":1e400}', key=b"!auth")
@example(value=b"1", key=b"!tenant:acme")
def test_no_record_on_the_queues_topic_stops_its_readers_and_the_next_one_still_counts(value, key):
    from kmq.ops.queues_topic import QueueConfigs
    from kmq.queue_config import QueueConfig
    from kmq.settings import Settings
    view = QueueConfigs.__new__(QueueConfigs)
    view._init_state(Settings(), None)
    view._read(ConfigRec(key, value, 1))
    view._read(ConfigRec(None, b"{}", 2))  # no key: not a queue's
    view._read(ConfigRec(b"after", QueueConfig(max_deliveries=7).encode(), 3))
    assert view.get("after").max_deliveries == 7


def test_an_unreadable_queues_record_is_counted():
    from kmq.ops.queues_topic import QueueConfigs
    from kmq.settings import Settings
    view = QueueConfigs.__new__(QueueConfigs)
    view._init_state(Settings(), None)
    for i, value in enumerate([b"1", b"null", b"[" * 100_000, b'{"v":1,"purged_before":[1]}']):
        view._read(ConfigRec(b"q%d" % i, value, i))
    view._read(ConfigRec(b"!tenant:acme", b'["v"]', 9))
    assert view.unreadable == 5
    # Decodable, but the tracker's own fields of other types, or a key that is no queue id:
    # each made every dispatch round fail (an audit: no shared queue got a message).
    for i, (key, fields) in enumerate([
            (b"q5", {"dispatch_since_ms": "soon"}), (b"q6", {"handover_pending": "yes"}),
            (b"q7", {"updated_at_ms": -1}), (b"q8", {"dispatch_since_ms": True}),
            (b"q9", {"purged_before": {str(p): 1 for p in range(1025)}}),  # 200,000 held 130 MB
            (b"q10", {"handover": {"0": -5}}), (b"q11", {"partition_starts": {"-1": 0}}),
            (b"bad key", {"dispatch": "partition", "handover_pending": True}),
            (b"q12\n", {})]):
        view._read(ConfigRec(key, json.dumps({"v": 1, **fields}).encode(), 10 + i))
    assert view.unreadable == 14 and not set(view.queues()) & {f"q{i}" for i in range(5, 13)}
    assert "bad key" not in view.queues()

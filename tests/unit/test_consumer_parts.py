"""The consumer's pure parts, without a broker: settlement log -> markers, commit ledger,
and the delivery header codec a shared consumer reads."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kmq.consumer.commits import CommitLedger
from kmq.consumer.held import HeldRange, MessageBatch
from kmq.consumer.settlement import SettlementLog
from kmq.protocol.masks import mask_of as rels_mask
from kmq.message import Message, Verb
from kmq.protocol import deliveries as D
from kmq.protocol import markers as M

R = M.RangeRef("q", 1, 100, 110)


class Limits:
    max_delay_s = 3600.0
    max_extend_s = 3600.0
    _timeout_ms = 30_000  # the consumer's visibility timeout


def held_range(log: SettlementLog, n: int = 10) -> HeldRange:
    h = HeldRange(R, Limits(), log)
    h.recs = [object()] * n
    h.rels = range(n)
    h.outstanding = n
    return h


def test_verbs_become_one_marker_per_range_and_verb():
    log = SettlementLog()
    h = held_range(log)
    msgs = [Message((h.recs[i], h, i)) for i in range(10)]
    for m in msgs[:4]:
        m.ack()
    msgs[4].release(2.5)
    msgs[5].release(2.5)
    msgs[6].reject("bad")
    msgs[7].extend(60)
    log.verbs.append((msgs[8], Verb.RETURN, 0))
    settled = []
    markers, counts = log.drain(lambda held, mask: settled.append(mask) or mask.bit_count())
    assert markers == [M.Ack(R, 0b1111), M.Release(R, 0b110000, 2500), M.Reject(R, 1 << 6, "bad"),
                       M.Extend(R, 1 << 7, 60000), M.Release(R, 1 << 8, 0, counted=False)]
    # by-user-code: every verb but the RETURN (kmq.consumer.user_code)
    assert counts == {"acked": 4, "released": 2, "rejected": 1, "settled": 8, "by-user-code": 8}
    assert settled == [0b1111, 0b110000, 1 << 6, 1 << 8]
    assert not log


def test_an_extend_never_asks_for_less_than_the_visibility_timeout():
    # The keepalive renews a visibility timeout every quarter of one: a shorter EXTEND let
    # the message go out again between two rounds while user code held it.
    log = SettlementLog()
    h = held_range(log)
    for i, seconds in enumerate((0, 1, 29.999, 30, 45)):
        Message((h.recs[i], h, i)).extend(seconds)
    markers, _ = log.drain(lambda held, mask: 0)
    assert markers == [M.Extend(R, 0b1111, 30_000), M.Extend(R, 1 << 4, 45_000)]


def test_a_batch_ack_is_one_run_whatever_its_size():
    log = SettlementLog()
    h = held_range(log)
    batch = MessageBatch()
    batch += h.hand_out(10)
    batch._runs.append((h, 0, 10))
    assert batch.ack() == 10
    markers, counts = log.drain(lambda held, mask: mask.bit_count())
    assert markers == [M.Ack(R, R.full_mask)] and counts["acked"] == 10


@given(st.lists(st.tuples(st.sampled_from(["ack", "batch", "drain"]), st.integers(0, 9)), max_size=60))
def test_every_ack_is_in_exactly_one_ack_marker(steps):
    # Acks are read from the range's state at each drain: whatever the interleaving of
    # single acks, batch acks and drains, each acked offset is sent once, and counted once.
    log = SettlementLog()
    h = held_range(log)
    msgs = h.hand_out(10)
    sent, counted, acked = 0, 0, set()
    for what, i in steps:
        if what == "ack" and i not in acked:
            msgs[i].ack()
            acked.add(i)
        elif what == "batch":
            batch = MessageBatch()
            batch += msgs[i:]
            batch._runs.append((h, i, 10))
            assert batch.ack() == len(set(range(i, 10)) - acked)
            acked |= set(range(i, 10))
        elif what == "drain":
            markers, counts = log.drain(lambda held, mask: mask.bit_count())
            for m in markers:
                assert sent & m.mask == 0  # never twice
                sent |= m.mask
            counted += counts["acked"]
    markers, counts = log.drain(lambda held, mask: mask.bit_count())
    sent |= sum(m.mask for m in markers)
    assert sent == sum(1 << i for i in acked) and counted + counts["acked"] == len(acked)
    assert not log


@given(st.sets(st.integers(0, 200), min_size=1))
def test_rels_mask_is_the_set_of_offsets(rels):
    assert rels_mask(sorted(rels), 201) == sum(1 << r for r in rels)


def test_the_ledger_commits_only_the_longest_durable_run():
    ledger = CommitLedger()
    a = ledger.add(0, 10, False)
    ledger.add(0, 20, True)  # another queue's records: durable at once
    c = ledger.add(0, 30, False)
    assert ledger.committable([0])[0] == {}
    a[1] = True
    offsets, forget = ledger.committable([0])
    assert offsets == {0: 20}
    forget()
    c[1] = True
    assert ledger.committable([0])[0] == {0: 30}
    assert ledger.committable([1])[0] == {}  # not assigned: nothing to commit there
    ledger.drop([0])
    assert ledger.committable([0])[0] == {}


@given(start=st.integers(0, 2**40), length=st.integers(1, 5000), data=st.data(),
       epoch=st.integers(0, 2**64 - 1), seq=st.integers(0, 2**64 - 1))
def test_delivery_headers_round_trip(start, length, data, epoch, seq):
    r = M.RangeRef("jobs", 3, start, start + length)
    mask = data.draw(st.integers(1, r.full_mask))
    d = D.Delivery(D.COPY, epoch, seq, 30_000, r, mask)
    assert D.decode(D.encode(d)) == d
    assert D.decode(D.encode_farewell(D.Farewell(epoch, seq))) == D.Farewell(epoch, seq)


@given(st.binary(max_size=200))
def test_garbage_on_a_lane_is_a_decode_error_never_a_crash(raw):
    try:
        D.decode(raw)
    except D.DeliveryDecodeError:
        pass


def test_a_truncated_header_is_refused():
    raw = D.encode(D.Delivery(D.COPY, 1, 2, 30_000, R, 0b101))
    for cut in range(len(raw)):
        with pytest.raises(D.DeliveryDecodeError):
            D.decode(raw[:cut])


def test_a_switch_of_mode_gives_partition_mode_a_group_of_its_own():
    from kmq.queue_config import QueueConfig
    from kmq.settings import Settings
    s = Settings(dispatch="shared")
    cfg = QueueConfig()
    assert cfg.group_id(s, "jobs") == "kmq.jobs"
    to_partition = QueueConfig(dispatch="partition", updated_at_ms=1234).switched(s, cfg)
    assert to_partition.handover_pending and to_partition.group_id(s, "jobs") == "kmq.jobs@1234"
    # Other settings changed later keep the group; a name no queue can have (not listed as a queue).
    assert to_partition.changed(max_deliveries=3).group_id(s, "jobs") == "kmq.jobs@1234"
    from kmq.protocol.placement import QUEUE_NAME_RE
    assert not QUEUE_NAME_RE.match("jobs@1234")


def test_the_flush_deadline_starts_at_the_first_verb_and_ends_with_the_send():
    from kmq.consumer.flusher import flush_due
    never = lambda: False  # noqa: E731
    assert flush_due(True, None, 10.0, 0.1, never) == (False, 10.1)
    assert flush_due(True, 10.1, 10.05, 0.1, never) == (False, 10.1)
    assert flush_due(True, 10.1, 10.1, 0.1, never) == (True, None)
    assert flush_due(True, 10.1, 10.05, 0.1, lambda: True) == (True, None)  # a shared consumer's refill


def test_verbs_sent_by_another_thread_take_their_deadline_with_them():
    # A fetch took them along with its START: a deadline kept past its time woke the
    # flusher at once, again and again, until the next verb.
    from kmq.consumer.flusher import flush_due
    assert flush_due(False, 10.1, 10.5, 0.1, lambda: True) == (False, None)
    assert flush_due(True, None, 10.6, 0.1, lambda: False) == (False, 10.7)  # the next verb's own


def test_an_extend_above_its_limit_names_the_setting_behind_the_limit():
    # It said only "seconds=6 is above the limit of 1 s": not which setting, nor the fix.
    h = held_range(SettlementLog())
    with pytest.raises(Exception, match=r"seconds=7200 is above the limit of 3600 s \(the queue's "
                                        r"max_processing_s.*give at most 3600"):
        Message((h.recs[0], h, 0)).extend(7200)
    with pytest.raises(Exception, match=r"delay_s=7200 is above the limit of 3600 s \(KMQ_MAX_DELAY_S\)"):
        Message((h.recs[1], h, 1)).release(7200)


def test_an_extend_above_12_hours_on_a_queue_allowing_longer_says_to_extend_again():
    # A queue's max_processing_s of 13 h: "give at most 43200, or raise the limit" - raising
    # it could not help, one EXTEND carries at most 12 h.
    h = held_range(SettlementLog())
    h.consumer.max_extend_s = 43200.0
    with pytest.raises(Exception, match=r"seconds=46800 is above the limit of 43200 s \(12 h, the most one "
                                        r"extend\(\) asks\): give at most 43200, and extend\(\) again later"):
        Message((h.recs[0], h, 0)).extend(46800)

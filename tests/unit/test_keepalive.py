"""The consumer's keepalive round (pure: time passed in)."""

from types import SimpleNamespace

from kmq.consumer.held import HeldRange
from kmq.consumer.keepalive import keepalive_round
from kmq.consumer.settlement import SettlementLog
from kmq.protocol.markers import Extend, RangeRef

R = RangeRef("q", 0, 10, 13)


def held(handed: int, handed_at: float) -> HeldRange:
    h = HeldRange(R, SimpleNamespace(), SettlementLog())
    h.recs = [object()] * 3
    h.rels = range(3)
    h.outstanding = 3
    h.handed = handed
    h.handouts = [(handed, handed_at)] if handed else []
    h.extended_at = h.kept_at = float("inf")  # never stalled, unless a test says when it was last extended
    return h


def round_at(h, now, vis=1.0, max_processing=1.0, interval=0.25):
    return keepalive_round([h], now=now, visibility_s=vis, max_processing_s=max_processing,
                           interval_s=interval, timeout_ms=int(vis * 1000))


def test_prefetched_messages_are_always_extended():
    out, lapsed = round_at(held(0, 0.0), now=1000.0)
    assert out == [Extend(R, 0b111, 1000)] and lapsed == 0


def test_a_handed_out_message_is_extended_once_then_lapses():
    h = held(1, handed_at=100.0)
    out, _ = round_at(h, now=100.1)  # the round right after the hand-out
    assert out == [Extend(R, 0b111, 1000)]
    out, lapsed = round_at(h, now=100.6)  # in its visibility: left alone
    assert out == [Extend(R, 0b110, 1000)] and lapsed == 0
    out, lapsed = round_at(h, now=101.6)  # past visibility + two rounds: the tracker has it back
    assert lapsed == 1 and 0 in h.lapsed and h.outstanding == 2


def test_max_processing_keeps_a_message_alive_longer():
    h = held(1, handed_at=0.0)
    out, lapsed = round_at(h, now=2.9, max_processing=4.0)
    assert out == [Extend(R, 0b111, 1000)] and lapsed == 0
    out, lapsed = round_at(h, now=3.5, max_processing=4.0)
    assert out == [Extend(R, 0b110, 1000)]


def test_settled_messages_are_neither_extended_nor_lapsed():
    h = held(1, handed_at=0.0)
    h.state[0] = 1  # acked
    out, lapsed = round_at(h, now=50.0)
    assert lapsed == 0 and out == [Extend(R, 0b110, 1000)]


def test_an_explicit_extend_beyond_the_next_round_is_not_shortened():
    h = held(1, handed_at=0.0)
    h.holds[0] = 60.0  # extend(60) at about t=0
    out, lapsed = round_at(h, now=0.1)
    assert out == [Extend(R, 0b110, 1000)] and lapsed == 0


def test_an_ordered_runs_prefetched_rest_is_not_extended_once_its_message_in_user_code_is_overdue():
    # A hung handler held its group: the rest of its run was extended for ever, and the
    # group (its head's copy included) could not go to another consumer.
    groups = {0: b"a", 1: b"a", 2: b"b"}  # a run of a; b is another group

    def group_of(h, i):
        return groups[i]

    def round_(h, now):
        return keepalive_round([h], now=now, visibility_s=2.0, max_processing_s=4.0, interval_s=0.25,
                               timeout_ms=1000, group_of=group_of)

    h = held(1, handed_at=0.0)
    assert round_(h, now=2.0)[0] == [Extend(R, 0b111, 1000)]  # within max_processing_s
    assert round_(h, now=2.5)[0] == [Extend(R, 0b100, 1000)]  # a's head overdue: only b's goes on
    # Without groups (an unordered queue) the prefetched ones are kept as before.
    assert round_at(held(1, handed_at=0.0), now=3.5, max_processing=4.0)[0] == [Extend(R, 0b110, 1000)]


def test_a_range_not_extended_for_a_visibility_timeout_is_the_trackers_already():
    # A stalled process (SIGSTOP): its EXTENDs after the stall were all late, and what it
    # had read ahead reached user code though acked elsewhere (kmq.consumer.stale).
    h = held(1, handed_at=0.0)
    h.extended_at = h.kept_at = 10.0
    out, lapsed = round_at(h, now=11.5)  # 1.5 s unextended, visibility 1 s
    assert out == [] and lapsed == 1 and h.lapsed == {0} and h.outstanding == 2
    h = held(1, handed_at=0.0)
    h.extended_at = h.kept_at = 10.0
    h.holds[0] = 30.0  # extend(20) at 10: its own deadline is later
    out, lapsed = round_at(h, now=11.5)
    assert lapsed == 0 and 0 not in h.lapsed


def test_an_overdue_runs_rest_in_another_range_and_after_the_lapse_is_not_extended_either():
    # CI: the run went on at its consumer in a second delivery (range), extended for ever;
    # and once the head lapsed it no longer counted as overdue, so its rest was extended again.
    def round_(ranges, now):
        return keepalive_round(ranges, now=now, visibility_s=2.0, max_processing_s=4.0, interval_s=0.25,
                               timeout_ms=1000, group_of=lambda h, i: b"a")

    head = held(1, handed_at=0.0)
    head.recs, head.rels, head.outstanding = [object()], range(1), 1
    rest = HeldRange(RangeRef("q", 0, 20, 22), SimpleNamespace(), SettlementLog())
    rest.recs, rest.rels, rest.outstanding, rest.handed = [object()] * 2, range(2), 2, 0
    rest.extended_at = head.extended_at = rest.kept_at = head.kept_at = float("inf")
    assert round_([head, rest], now=2.0)[0] == [Extend(R, 0b1, 1000), Extend(rest.ref, 0b11, 1000)]
    assert round_([head, rest], now=2.5)[0] == []   # the head is overdue: neither is extended
    head.extended_at = rest.extended_at = head.kept_at = rest.kept_at = 4.9
    out, lapsed = round_([head, rest], now=5.0)     # the head lapses (still in user code) ...
    assert lapsed == 1 and out == []
    assert round_([head, rest], now=5.25)[0] == []  # ... and its run's rest stays unextended


def test_a_round_leaves_extended_at_until_its_extend_is_written():
    # A stall between deciding an EXTEND and writing it kept nothing invisible: the range
    # counts as extended from the writer's confirmation on (kmq.consumer.flusher._extended).
    from kmq.consumer.flusher import _extended
    h = held(0, 0.0)
    h.extended_at = 10.0
    out, _ = round_at(h, now=10.5)
    assert out == [Extend(R, 0b111, 1000)] and h.extended_at == 10.0
    _extended({R: h}, 10.5, True, out)
    assert h.extended_at == 10.5
    _extended({R: h}, 10.25, True, out)  # an earlier round's confirmation, arriving late
    assert h.extended_at == 10.5


def test_while_user_code_is_away_its_read_ahead_is_not_extended_and_goes_back():
    # kmq.consumer.user_code: a hung consumer's read-ahead was kept invisible for as long as
    # it lived; it now comes back with the message in user code, to consumers that work.
    from kmq.consumer.flusher import _extended
    h = held(1, handed_at=0.0)
    out, lapsed = keepalive_round([h], now=0.1, visibility_s=1.0, max_processing_s=1.0, interval_s=0.25,
                                  timeout_ms=1000, read_ahead=False)
    assert out == [Extend(R, 0b001, 1000)] and lapsed == 0  # only what user code holds
    h.extended_at = h.kept_at = 0.0
    _extended({R: h}, 0.1, False, out)
    assert (h.kept_at, h.extended_at) == (0.1, 0.0)  # alive; its read-ahead is not kept
    # Back a moment later: its read-ahead is extended again, while the tracker still has it ...
    assert round_at(h, now=0.9)[0] == [Extend(R, 0b110, 1000)]
    # ... but not once it went a visibility timeout unextended (the receive drops it), and
    # what user code holds is not taken for a stall while the process kept it.
    h.kept_at = 1.2
    out, lapsed = round_at(h, now=1.3)
    assert out == [] and lapsed == 0

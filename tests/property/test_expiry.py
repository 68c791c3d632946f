"""The expiry decisions (kmq.protocol.expiry), pure: every expired offset is accounted for once."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

from kmq.backoff import Backoff
from kmq.protocol import envelope, expiry
from kmq.protocol import markers as M
from kmq.protocol.entries import Cause
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import DueSend, Expiry

NOW = 10_000_000


@given(st.integers(0, 2**50), st.integers(0, 2**50))
def test_a_tick_runs_at_its_own_time_however_late_it_is_read(tick_ms, lag_ms):
    """The log decides between an ack and a deadline (tests/unit/test_track_markers.py has
    the case); the clock has observed the TICK, so it is never behind it."""
    assert expiry.tick_time(tick_ms + lag_ms, tick_ms) == tick_ms


@given(st.integers(0, 1000), st.integers(1, 300), st.integers(0, 1500), st.integers(1, 2**300),
       st.integers(0, 10), st.integers(1, 10))
def test_a_start_is_admitted_above_its_purge_floor_on_known_partitions_only(start, length, floor, mask, part,
                                                                           parts):
    r = M.RangeRef("q", part, start, start + length)
    s = M.Start(r, 1000, mask & r.full_mask or 1)
    got = expiry.admit_start(s, parts, floor)
    if part >= parts:
        assert got == Outcome.UNKNOWN_PARTITION
        return
    want = {o for o in M.mask_offsets(start, s.mask) if o >= floor}
    if not want:
        assert got is None
    else:
        assert set(M.mask_offsets(start, got.mask)) == want and got.range == r


@given(st.integers(0, 2**45), st.integers(1, 2**36))
def test_a_backoff_deadline_is_never_early_and_late_by_less_than_its_grain(now_ms, delay_ms):
    grain = max(expiry.BACKOFF_GRAIN_MS, delay_ms // expiry.BACKOFF_GRAIN_SHARE)
    d = expiry.backoff_deadline(now_ms, delay_ms)
    assert now_ms + delay_ms <= d < now_ms + delay_ms + grain and d % grain == 0


causes = st.sampled_from(list(Cause))


@st.composite
def scenario(draw):
    """Expiries of a few ranges, records read back for some offsets, maybe an end, maybe a crash."""
    due, records, ends = [], {}, {}
    for i in range(draw(st.integers(1, 4))):
        part = draw(st.integers(0, 2))
        start = 100 * i
        r = M.RangeRef("q", part, start, start + draw(st.integers(1, 40)))
        mask = draw(st.integers(1, r.full_mask))
        due.append(Expiry(r, mask, draw(causes), "why", NOW - 5000, NOW - 1))
        for off in M.mask_offsets(start, mask):
            if draw(st.integers(0, 4)):  # mostly present
                deliveries = draw(st.integers(0, 6))
                records.setdefault(part, {})[off] = expiry.Record(
                    b"v", [(envelope.ID, b"id-%d" % off), (envelope.DELIVERIES, str(deliveries).encode())], 1)
    for part in {d.range.partition for d in due}:
        if draw(st.booleans()):
            ends[part] = draw(st.integers(0, 400))
    sends = [DueSend("q", f"m{i}", NOW - 10, b"s", ()) for i in range(draw(st.integers(0, 3)))]
    return due + sends, records, ends


@settings(max_examples=300, deadline=None)
@given(scenario(), st.integers(1, 6), st.booleans(), st.sampled_from([None, Backoff.fixed(2)]), st.data())
def test_every_expired_offset_and_due_send_is_accounted_for_exactly_once(sc, max_deliveries, dead_letter,
                                                                         backoff, data):
    due, records, ends = sc
    reads = {p: expiry.PartitionRead(records.get(p, {}), ends.get(p)) for p in {0, 1, 2}}
    found_sends = {("q", d.message_id) for d in due if isinstance(d, DueSend) and data.draw(st.booleans())}
    rules = expiry.QueueRules(max_deliveries, backoff, dead_letter)
    plan = expiry.plan(due, reads, now_ms=NOW, rules=lambda q: rules, target_partition=lambda q: 0,
                       dlq_partition=lambda q: 1, max_message_bytes=1000, found_sends=found_sends,
                       uniform=lambda a, b: b)
    expiries = [d for d in due if isinstance(d, Expiry)]
    sends = [d for d in due if isinstance(d, DueSend)]
    expired = sum(d.count for d in expiries)
    by_outcome = Counter(w.outcome for w in plan.writes)
    counted = Counter({what: n for (_q, what), n in plan.counts.items()})
    deferred = sum(mask.bit_count() for waits in plan.deferred.values() for mask, _ in waits)
    # Each expired offset: one write (republish or dead letter, payload-expired ones included),
    # or counted beyond the end, found after a crash, waiting out a backoff, or discarded.
    offset_writes = by_outcome[Outcome.REDELIVERED] + by_outcome[Outcome.DEAD_LETTERED]
    assert offset_writes + counted[Outcome.BEYOND_END] + counted[Outcome.FOUND_AFTER_CRASH] \
        + counted[Outcome.DISCARDED] + deferred == expired
    assert counted[Outcome.BACKOFF] == deferred
    # Each due send: published once, or found from an earlier attempt.
    assert by_outcome[Outcome.SCHEDULED_DELIVERED] + counted[Outcome.SCHEDULED_FOUND] == len(sends)
    # Missing records past a known end are never dead-lettered; below it they are, as payload-expired.
    missing_beyond = sum(1 for d in expiries for o in M.mask_offsets(d.range.start, d.mask)
                         if o not in records.get(d.range.partition, {}) and ends.get(d.range.partition) is not None
                         and o >= ends[d.range.partition])
    assert counted[Outcome.BEYOND_END] == missing_beyond
    missing = sum(1 for d in expiries for o in M.mask_offsets(d.range.start, d.mask)
                  if o not in records.get(d.range.partition, {}))
    assert counted[Outcome.PAYLOAD_EXPIRED] == missing - missing_beyond
    for w in plan.writes:
        if w.if_too_large is not None:  # the fallback: headers only, to the dead-letter topic
            fb = w.if_too_large
            assert fb.topic == expiry.DLQ and fb.value == b"" and fb.outcome == Outcome.TOO_LARGE
            assert (envelope.DLQ_REASON, envelope.REASON_TOO_LARGE.encode()) in fb.headers
    rejected = {(d.range.partition, o) for d in expiries if d.cause == Cause.REJECTED
                for o in M.mask_offsets(d.range.start, d.mask)}
    for w in plan.writes:
        if w.outcome == Outcome.REDELIVERED:  # a rejected message never comes back
            assert (w.partition, int(dict(w.headers)[envelope.ID][3:])) not in rejected
    for waits in plan.deferred.values():
        for _mask, deadline in waits:
            assert deadline >= NOW + 2000  # the backoff, never early


@given(st.integers(1, 30))
def test_what_an_attempt_before_a_crash_wrote_is_not_written_again(n):
    r = M.RangeRef("q", 0, 0, n)
    due = [Expiry(r, r.full_mask, Cause.TIMEOUT, "", NOW - 5000, NOW - 1)]
    recs = {o: expiry.Record(b"v", [(envelope.ID, b"id-%d" % o)], 1) for o in range(n)}
    reads = {0: expiry.PartitionRead(recs)}
    kw = dict(now_ms=NOW, rules=lambda q: expiry.QueueRules(5), target_partition=lambda q: 0,
              dlq_partition=lambda q: 1, max_message_bytes=1000)
    first = expiry.plan(due, reads, **kw)
    assert len(first.writes) == n
    found = {r: {expiry.written_key(w.topic, w.headers) for w in first.writes[: n // 2]}}
    again = expiry.plan(due, reads, found=found, **kw)
    assert len(again.writes) == n - n // 2
    assert again.counts[("q", Outcome.FOUND_AFTER_CRASH)] == n // 2


@given(st.sampled_from(["shared", "partition", None]), st.sampled_from(["shared", "partition"]),
       st.integers(0, 10**13), st.integers(0, 10**13))
def test_a_start_is_tracked_in_partition_mode_and_in_shared_mode_only_just_after_a_switch(
        dispatch, default, since_ms, now_ms):
    from kmq.queue_config import QueueConfig
    from kmq.settings import Settings
    cfg = QueueConfig(dispatch=dispatch, dispatch_since_ms=since_ms)
    allowed = expiry.start_allowed(cfg, Settings(dispatch=default), now_ms)
    shared = (dispatch or default) == "shared"
    assert allowed == (not shared or (since_ms > 0 and now_ms - since_ms < expiry.START_GRACE_MS))


@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_another_queues_record_is_never_written_under_this_queues_name(foreign):
    """A forged marker of queue q naming offsets that hold queue x's records: they were
    republished (or dead-lettered) as q's messages."""
    n = len(foreign)
    r = M.RangeRef("q", 0, 0, n)
    due = [Expiry(r, r.full_mask, Cause.TIMEOUT, "", NOW - 5000, NOW - 1)]
    recs = {o: expiry.Record(b"v", [(envelope.ID, b"id-%d" % o)], 1, b"x" if foreign[o] else b"q")
            for o in range(n)}
    plan = expiry.plan(due, {0: expiry.PartitionRead(recs)}, now_ms=NOW, rules=lambda q: expiry.QueueRules(5),
                       target_partition=lambda q: 0, dlq_partition=lambda q: 1, max_message_bytes=1000)
    assert len(plan.writes) == foreign.count(False)
    assert plan.counts[("q", Outcome.FOREIGN_RECORD)] == foreign.count(True)

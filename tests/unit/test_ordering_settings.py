"""Ordered groups and dedup at the edges: queue settings, send arguments, headers kept."""

import pytest

import kmq
from kmq.errors import ConfigError
from kmq.protocol import envelope as V
from kmq.protocol.entries import Cause
from kmq.protocol.ordering import dedup_message_id
from kmq.queue_config import QueueConfig

client = kmq.Client("127.0.0.1:1", max_message_bytes=1000)  # nothing listens: nothing is written


@pytest.mark.parametrize("changes, words", [
    (dict(ordering="fifo"), "ordering='fifo': use one of 'none', 'group'"),
    (dict(ordering="group", spread=2), "ordering='group' needs spread=1"),
    (dict(ordering="group", dispatch="partition"), "needs dispatch='shared'"),
    (dict(dead_letter_head="skip"), "dead_letter_head='skip': use one of 'continue', 'hold'"),
    (dict(dedup_window_s=0.5), "dedup_window_s=0.5 must be a number of seconds from 1 to 43200"),
    (dict(dedup_window_s="5m"), "dedup_window_s"),
])
def test_bad_ordering_settings_name_the_field_and_the_fix(changes, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        QueueConfig().changed(**changes)


def test_ordering_settings_default_and_round_trip():
    cfg = QueueConfig()
    assert (cfg.ordering, cfg.dead_letter_head, cfg.dedup_window_s) == ("none", "continue", 300.0)
    new = cfg.changed(ordering="group", dead_letter_head="hold", dedup_window_s=60)
    assert QueueConfig.decode(new.encode()) == new
    assert new.changed(ordering=None, dead_letter_head=None, dedup_window_s=None).ordering == "none"


def test_a_config_written_before_ordering_existed_decodes_with_the_defaults():
    old = b'{"v": 1, "spread": 1, "dispatch": "shared"}'
    assert QueueConfig.decode(old).ordering == "none"


@pytest.mark.parametrize("kwargs, words", [
    (dict(group=""), "group='' must be a str or bytes of 1 to 128 bytes"),
    (dict(group="g" * 129), "group="),
    (dict(group=42), "group=42"),
    (dict(dedup_id=b""), "dedup_id=b''"),
    (dict(dedup_id="d" * 129), "dedup_id="),
])
def test_bad_group_or_dedup_id_raises_before_writing(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        client.send("q", b"x", **kwargs)
    assert client._producer is None


def test_dedup_id_send_id_is_the_same_in_every_process():
    assert dedup_message_id("payments", b"txn-991") == dedup_message_id("payments", "txn-991".encode())


def _expire(headers, cause):
    return V.after_expiry(headers, partition=0, offset=7, record_timestamp_ms=1, cause=cause,
                          reason="", started_ms=1, now_ms=2, max_deliveries=3)


def test_a_redelivery_keeps_its_group_but_not_its_dedup_id():
    headers = [(V.ID, b"m1"), (V.GROUP, b"acct-42"), (V.DEDUP_ID, b"txn-991"), ("u", b"1")]
    out = _expire(headers, Cause.TIMEOUT)
    assert isinstance(out, V.Republish)
    assert (V.GROUP, b"acct-42") in out.headers and not any(k == V.DEDUP_ID for k, _ in out.headers)
    dead = _expire(headers, Cause.REJECTED)
    assert (V.GROUP, b"acct-42") in dead.headers  # and so the redrive of the dead letter


def test_a_redriven_message_keeps_its_group():
    from kmq.ops.deadletters import _redriven_headers

    class Letter:
        id, offset = "m1", 9
        raw_headers = [(V.ID, b"m1"), (V.GROUP, b"acct-42"), (V.DLQ_REASON, b"rejected")]
    assert (V.GROUP, b"acct-42") in _redriven_headers(Letter())


def test_the_redelivery_plan_names_an_ordered_queues_messages_that_were_not_republished():
    from kmq.protocol import expiry
    from kmq.protocol.markers import RangeRef
    from kmq.protocol.state import Expiry

    r = RangeRef("q", 0, 0, 4)
    due = [Expiry(r, 0b1111, Cause.REJECTED, "bad", 0, 1),      # dead-lettered
           Expiry(RangeRef("q", 0, 10, 12), 0b11, Cause.TIMEOUT, "", 0, 1)]  # republished
    recs = {o: expiry.Record(b"v", [(V.ID, b"m%d" % o), (V.GROUP, b"g")], 1, b"q") for o in (0, 1, 2, 10, 11)}
    reads = {0: expiry.PartitionRead(recs, end=20)}  # offset 3: gone (payload expired)
    # 0-2 dead-lettered (a redrive may bring them back); 3 gone: settled, nothing holds for it
    for ordered, want in ((True, [("q", 0, 0, True), ("q", 0, 1, True), ("q", 0, 2, True), ("q", 0, 3, False)]),
                          (False, [])):
        plan = expiry.plan(due, reads, now_ms=2, rules=lambda q: expiry.QueueRules(5, None, True, ordered),
                           target_partition=lambda q: 0, dlq_partition=lambda q: 0, max_message_bytes=10**6,
                           found=None, found_sends=None)
        assert sorted(plan.ended) == want


def test_a_dropped_head_is_settled_so_a_held_group_never_waits_for_it():
    # dead_letter=False drops it (nothing to redrive): it was reported as dead-lettered,
    # and with dead_letter_head="hold" its group waited for a redrive that could never come.
    from kmq.protocol import expiry
    from kmq.protocol.markers import RangeRef
    from kmq.protocol.state import Expiry

    due = [Expiry(RangeRef("q", 0, 0, 2), 0b11, Cause.REJECTED, "bad", 0, 1)]
    recs = {o: expiry.Record(b"v", [(V.ID, b"m%d" % o), (V.GROUP, b"g")], 1, b"q") for o in (0, 1)}
    plan = expiry.plan(due, {0: expiry.PartitionRead(recs, end=20)}, now_ms=2,
                       rules=lambda q: expiry.QueueRules(5, None, False, True),
                       target_partition=lambda q: 0, dlq_partition=lambda q: 0, max_message_bytes=10**6,
                       found=None, found_sends=None)
    assert sorted(plan.ended) == [("q", 0, 0, False), ("q", 0, 1, False)]


def test_an_ordered_redelivery_too_large_to_write_again_ends_its_head_as_dead_lettered():
    # Swapped for its headers-only dead letter, it was never reported: the group waited for a
    # copy that never came.
    from types import SimpleNamespace

    from agents.redeliver import Redeliverer
    from kmq.protocol import expiry
    from kmq.protocol.markers import RangeRef
    from kmq.protocol.state import Expiry

    due = [Expiry(RangeRef("q", 0, 0, 1), 0b1, Cause.TIMEOUT, "", 0, 1)]
    recs = {0: expiry.Record(b"v" * 100, [(V.ID, b"m0"), (V.GROUP, b"g")], 1, b"q")}
    plan = expiry.plan(due, {0: expiry.PartitionRead(recs, end=20)}, now_ms=2,
                       rules=lambda q: expiry.QueueRules(5, None, True, True),
                       target_partition=lambda q: 0, dlq_partition=lambda q: 0, max_message_bytes=10**6,
                       found=None, found_sends=None)
    assert plan.ended == [] and [w.ends for w in plan.writes] == [("q", 0, 0)]
    written = []
    fake = SimpleNamespace(
        settings=SimpleNamespace(queue_topic="kmq.queue", dlq_topic="kmq.dlq", max_message_bytes=10**6),
        _get_producer=lambda: None,
        _flush=lambda producer: None,
        _produce=lambda producer, topic, key, value, partition, headers: written.append(topic) or topic != "kmq.queue")
    counts, ended = Redeliverer._carry_out(fake, plan.writes)
    assert written == ["kmq.queue", "kmq.dlq"] and ended == [("q", 0, 0, True)]
    assert counts[("q", expiry.Outcome.TOO_LARGE)] == 1


def test_a_consumer_holds_a_group_for_a_rejected_head_only_if_it_is_dead_lettered():
    # With dead_letter=False the tracker drops (settles) it; the consumer still gave back
    # the rest of the run as if the group were held.
    from types import SimpleNamespace

    from kmq.consumer.gated_receive import GatedReceive
    from kmq.queue_config import QueueConfig

    def holds(**cfg):
        return GatedReceive._holds_dead_letters(SimpleNamespace(_queue_config=QueueConfig(**cfg)))
    assert holds(dead_letter_head="hold") and not holds(dead_letter_head="hold", dead_letter=False)
    assert not holds(dead_letter_head="continue")

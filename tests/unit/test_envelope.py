"""What an expired delivery becomes: republished with count + 1, or dead-lettered."""

from kmq.protocol import envelope as V
from kmq.protocol.entries import Cause


def decide(headers, cause=Cause.TIMEOUT, reason="", max_deliveries=3):
    return V.after_expiry(headers, partition=2, offset=40, record_timestamp_ms=1000, cause=cause,
                          reason=reason, started_ms=2000, now_ms=9000,
                          max_deliveries=max_deliveries)


def test_a_first_timeout_republishes_with_one_delivery_and_keeps_user_headers():
    plan = decide([("kmq.id", b"abc"), ("h", b"v")])
    assert isinstance(plan, V.Republish)
    h = dict(plan.headers)
    assert h["kmq.id"] == b"abc" and h["kmq.deliveries"] == b"1"
    assert h["kmq.first-delivery-ms"] == b"2000" and h["kmq.enqueued-ms"] == b"1000"
    assert ("h", b"v") in plan.headers


def test_a_plain_kafka_record_gets_a_stable_id_from_its_origin():
    plan = decide(None)
    assert dict(plan.headers)["kmq.id"] == b"2:40"


def test_reaching_max_deliveries_dead_letters_with_the_reason():
    plan = decide([("kmq.deliveries", b"2"), ("kmq.first-delivery-ms", b"1500")])
    assert isinstance(plan, V.DeadLetter) and plan.reason == "max-deliveries"
    h = dict(plan.headers)
    assert h["kmq.deliveries"] == b"3" and h["kmq.first-delivery-ms"] == b"1500"
    assert h["kmq.dlq.last-delivery-ms"] == b"2000" and h["kmq.dlq.reason"] == b"max-deliveries"


def test_a_rejected_message_is_dead_lettered_on_its_first_delivery():
    plan = decide([], cause=Cause.REJECTED, reason="unparseable")
    assert isinstance(plan, V.DeadLetter) and plan.reason == "rejected"
    assert dict(plan.headers)["kmq.dlq.detail"] == b"unparseable"


def test_a_returned_message_keeps_its_delivery_count():
    plan = decide([("kmq.deliveries", b"2")], cause=Cause.RETURNED)
    assert isinstance(plan, V.Republish) and dict(plan.headers)["kmq.deliveries"] == b"2"


def test_a_garbled_delivery_count_counts_as_none():
    plan = decide([("kmq.deliveries", b"lots")])
    assert dict(plan.headers)["kmq.deliveries"] == b"1"


def test_without_dead_letters_the_last_delivery_and_a_reject_are_dropped():
    # `dead_letter=False` ("--no-dead-letter: dead-letter, or drop") redelivered past
    # max_deliveries for ever (176 times in 12 s of releases, by a black-box run).
    def quiet(headers, cause=Cause.TIMEOUT, reason=""):
        return V.after_expiry(headers, partition=2, offset=40, record_timestamp_ms=1000, cause=cause,
                              reason=reason, started_ms=2000, now_ms=9000, max_deliveries=3,
                              dead_letter=False)
    assert isinstance(quiet([("kmq.deliveries", b"1")]), V.Republish)
    for cause in (Cause.TIMEOUT, Cause.RELEASED, Cause.RELEASED_BACKOFF, Cause.DEFERRED):
        assert quiet([("kmq.deliveries", b"2")], cause) == V.Discard("max-deliveries")
    assert quiet([], Cause.REJECTED, "bad") == V.Discard("bad")
    assert isinstance(quiet([("kmq.deliveries", b"5")], Cause.RETURNED), V.Republish)  # never handled

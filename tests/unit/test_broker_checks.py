"""The broker settings kmq depends on: decisions from reported configs, messages that say the fix.

Given a broker's DescribeConfigs answer (as strings), a worker refuses to start when
idle groups would lose their offsets before queue messages expire, or when redrive's
transactions would exceed ``transaction.max.timeout.ms``; a changelog keeping tombstones
shorter than markers is a warning (the data-dir check rebuilds stale tables).
"""

from __future__ import annotations

import pytest

from kmq.errors import ConfigError
from kmq.kafka import broker_checks as B
from kmq.settings import Settings

DAY_MS = 86_400_000
KAFKA_DEFAULTS = {"offsets.retention.minutes": "10080", "transaction.max.timeout.ms": "900000"}


def test_kafkas_default_offsets_retention_is_refused_under_the_default_14_day_queue():
    (finding,) = B.check_broker(Settings(), KAFKA_DEFAULTS)
    assert finding.fatal and finding.setting == "offsets.retention.minutes"
    assert "offsets.retention.minutes >= 20160" in finding.message
    assert "KAFKA_OFFSETS_RETENTION_MINUTES" in finding.message
    assert "KMQ_QUEUE_RETENTION_MS" in finding.message


def test_offsets_retention_covering_the_queue_retention_passes():
    s = Settings()
    assert B.check_broker(s, {**KAFKA_DEFAULTS, "offsets.retention.minutes": "20160"}) == []
    assert B.check_broker(s.replace(queue_retention_ms=7 * DAY_MS, max_delay_s=3 * DAY_MS / 1000),
                          KAFKA_DEFAULTS) == []


def test_a_queue_topic_kept_longer_than_the_setting_needs_offsets_that_long():
    """The queue topic made by other tooling with 30 days: offsets kept 21 days expire first."""
    s = Settings()
    compose = {**KAFKA_DEFAULTS, "offsets.retention.minutes": "30240"}
    assert B.check_broker(s, compose, {"retention.ms": str(14 * DAY_MS)}) == []
    assert B.check_broker(s, compose, {"retention.ms": str(7 * DAY_MS)}) == [], "the setting counts too"
    (finding,) = B.check_broker(s, compose, {"retention.ms": str(30 * DAY_MS)})
    assert finding.fatal and "kmq.queue's retention.ms=2592000000 (30.0 days)" in finding.message
    assert "offsets.retention.minutes >= 43200" in finding.message


def test_a_queue_topic_kept_forever_is_refused_with_the_command_that_bounds_it():
    (finding,) = B.check_broker(Settings(), {"offsets.retention.minutes": "30240"}, {"retention.ms": "-1"})
    assert finding.fatal and "keeps them forever (retention.ms=-1)" in finding.message
    assert "--entity-name kmq.queue --add-config retention.ms=1209600000" in finding.message


def test_the_start_check_reads_the_queue_topics_retention(monkeypatch):
    monkeypatch.setattr(B, "describe_broker_configs", lambda s, t: {1: {"offsets.retention.minutes": "30240"}})
    monkeypatch.setattr(B, "describe_topic_config", lambda s, topic, t:
                        {"retention.ms": str(30 * DAY_MS)} if topic == s.queue_topic else None)
    with pytest.raises(ConfigError, match="kmq.queue's retention.ms"):
        B.check_at_start(Settings(), "changelog")


def test_a_delivery_timeout_above_the_brokers_transaction_bound_is_refused_with_the_fix():
    s = Settings(delivery_timeout_ms=1_200_000)
    (finding,) = B.check_broker(s, {**KAFKA_DEFAULTS, "offsets.retention.minutes": "30240"})
    assert finding.fatal
    assert "KMQ_DELIVERY_TIMEOUT_MS=1200000" in finding.message
    assert "transaction.max.timeout.ms=900000" in finding.message
    assert "at most 900000" in finding.message


def test_redrive_asks_for_at_least_a_minute_and_covers_the_delivery_timeout():
    assert B.redrive_transaction_timeout_ms(Settings(delivery_timeout_ms=30_000)) == 60_000
    assert B.redrive_transaction_timeout_ms(Settings(delivery_timeout_ms=300_000)) == 300_000
    assert B.check_broker(Settings(), {"transaction.max.timeout.ms": "300000"}) == []
    assert B.check_broker(Settings(), {"transaction.max.timeout.ms": "299999"})[0].fatal


def test_a_transaction_bound_under_a_minute_is_answered_with_the_brokers_fix_only():
    # Found by an audit: it said "Lower KMQ_DELIVERY_TIMEOUT_MS to at most 45000", and at 45000
    # the check refused the same way (redrive's transactions last at least 60000 ms).
    (finding,) = B.check_broker(Settings(), {"transaction.max.timeout.ms": "45000"})
    assert finding.message.endswith(
        "Raise transaction.max.timeout.ms on the brokers to at least 300000 (redrive's transactions "
        "last at least 60000 ms, whatever KMQ_DELIVERY_TIMEOUT_MS)")
    assert "Lower" not in finding.message
    (finding,) = B.check_broker(Settings(delivery_timeout_ms=45_000), {"transaction.max.timeout.ms": "45000"})
    assert "at least 60000" in finding.message and "Lower" not in finding.message
    # Unknown bound (redrive's refusal): lowering is offered only while it helps.
    assert B.transaction_timeout_fix(Settings(delivery_timeout_ms=60_000), None).startswith("Raise")
    assert B.transaction_timeout_fix(Settings(delivery_timeout_ms=60_001), None).startswith("Lower")


@pytest.mark.parametrize("bound_ms", [30_000, 45_000, 59_999, 60_000, 100_000, 299_999])
def test_the_delivery_timeout_the_fix_offers_passes_the_check(bound_ms):
    (finding,) = B.check_broker(Settings(), {"transaction.max.timeout.ms": str(bound_ms)})
    if "Lower KMQ_DELIVERY_TIMEOUT_MS to at most" in finding.message:
        lowered = Settings(delivery_timeout_ms=bound_ms)
        assert B.check_broker(lowered, {"transaction.max.timeout.ms": str(bound_ms)}) == []
    else:
        assert bound_ms < B.MIN_REDRIVE_TRANSACTION_TIMEOUT_MS


def test_a_broker_that_reports_nothing_is_not_checked():
    assert B.check_broker(Settings(), {}) == []


def test_the_changelog_keeps_tombstones_as_long_as_markers():
    s = Settings(markers_retention_ms=3 * DAY_MS)
    config = B.changelog_topic_config(s.replace(profile="production"))
    assert config == {"min.insync.replicas": "2", "delete.retention.ms": str(3 * DAY_MS),
                      "max.message.bytes": str(s.max_message_bytes + 65_536)}  # delayed sends' entries
    assert B.check_changelog(s, "t", {"delete.retention.ms": str(3 * DAY_MS)}) == []
    (finding,) = B.check_changelog(s, "app-tracker-changelog", {"delete.retention.ms": "86400000"})
    assert not finding.fatal
    assert "--entity-name app-tracker-changelog --add-config delete.retention.ms=259200000" \
        in finding.message


def test_a_fatal_finding_stops_the_start_with_every_fix(monkeypatch):
    s = Settings(delivery_timeout_ms=1_200_000)
    monkeypatch.setattr(B, "describe_broker_configs", lambda s, t: {1: KAFKA_DEFAULTS, 2: KAFKA_DEFAULTS})
    monkeypatch.setattr(B, "describe_topic_config", lambda s, topic, t: None)
    with pytest.raises(ConfigError) as raised:
        B.check_at_start(s, "changelog")
    text = str(raised.value)
    assert "offsets.retention.minutes" in text and "KMQ_DELIVERY_TIMEOUT_MS" in text
    assert text.count("offsets.retention.minutes=10080") == 1, "one message per finding, not per broker"


def test_a_shared_queues_position_has_no_offsets_retention_cliff():
    """Shared queues keep their position as cursors in the tracker's table (compacted
    changelog, never tombstoned), not as group offsets: an idle month changes nothing."""
    from kmq.protocol.markers import Ack, RangeRef, Start, Tick
    from kmq.protocol.state import PartitionState
    from kmq.protocol.store import MemoryStore

    r = RangeRef("orders", 0, 100, 110)
    s = PartitionState(MemoryStore())
    s.apply(Start(r, 1000, r.full_mask), now_ms=0)
    s.apply(Ack(r, r.full_mask), now_ms=1)
    month_ms = 30 * DAY_MS
    s.settle(s.due(month_ms))
    s.apply(Tick(month_ms), now_ms=month_ms)
    assert s.cursors() == {("orders", 0): 110}


def test_a_tracker_without_describe_configs_starts_with_a_warning_that_names_the_acl(monkeypatch):
    def refused(s, t):
        raise B.NotAllowedToCheck("CLUSTER_AUTHORIZATION_FAILED")
    monkeypatch.setattr(B, "describe_broker_configs", refused)
    monkeypatch.setattr(B, "describe_topic_config", lambda s, topic, t: None)
    (warning,) = B.check_at_start(Settings(), "changelog").warnings
    assert "DESCRIBE_CONFIGS on the cluster" in warning and "kmq acls" in warning


def test_redrive_refused_for_its_transaction_timeout_names_the_setting_and_the_fix(monkeypatch):
    """Where the tracker's start check cannot reach (the CLI's own KMQ_DELIVERY_TIMEOUT_MS),
    the broker's INVALID_TRANSACTION_TIMEOUT at init_transactions says what to change.
    A fake producer at the client constructor: the embedded broker enforces no bound."""
    from confluent_kafka import KafkaError, KafkaException

    import kmq.ops.deadletters as deadletters

    asked: list[dict] = []

    class RefusingProducer:
        def __init__(self, conf: dict) -> None:
            asked.append(conf)

        def init_transactions(self, timeout_s: float) -> None:
            raise KafkaException(KafkaError(KafkaError.INVALID_TRANSACTION_TIMEOUT))

        def poll(self, timeout_s: float) -> int:
            return 0

    monkeypatch.setattr(deadletters, "Producer", RefusingProducer)
    s = Settings(delivery_timeout_ms=1_200_000)
    with pytest.raises(ConfigError, match=r"KMQ_DELIVERY_TIMEOUT_MS=1200000 .*transaction\.max\.timeout\.ms"):
        deadletters.redrive(s, "orders")
    assert asked[0]["transaction.timeout.ms"] == B.redrive_transaction_timeout_ms(s) == 1_200_000

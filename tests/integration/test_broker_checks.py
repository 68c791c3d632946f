"""The start-up checks read a real broker's configs (the embedded Tansu broker).

Tansu reports topic configs but no broker configs: the changelog's tombstone retention is
read and checked; the broker-wide checks are skipped (tests/unit/test_broker_checks.py
covers their decisions).
"""

from __future__ import annotations

import os
from pathlib import Path

from kmq.kafka import broker_checks as B

ROOT = Path(__file__).resolve().parents[2]


def test_check_at_start_on_the_embedded_broker_reads_the_changelog_and_refuses_nothing(make_settings):
    from confluent_kafka.admin import AdminClient, NewTopic

    s = make_settings()
    topic = f"{s.app_id}-tracker-changelog"
    admin = AdminClient(s.client_config())
    for fut in admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "delete.retention.ms": "3600000"})]).values():
        fut.result(10)
    report = B.check_at_start(s, topic)
    assert report.tombstones_kept_ms == 3_600_000  # the lower of the topic's and the setting's
    assert any("delete.retention.ms=3600000" in w for w in report.warnings)
    assert B.check_at_start(s, f"{s.app_id}-missing").tombstones_kept_ms == s.markers_retention_ms


def test_a_worker_creates_its_changelog_keeping_tombstones_and_rebuilds_stale_tables(
        make_settings, artifacts, queue):
    import time

    import kmq
    from app import data_dir as D
    from kmq.dev.devstack import TrackerProcess
    from kmq.kafka.acls import changelog_topic
    from tests.conftest import wait_for
    from tests.integration.views import scheduled

    s = make_settings(markers_retention_ms=3 * 86_400_000, max_delay_s=86_400.0)
    log = artifacts / f"tracker-stale-{s.app_id}.log"

    with TrackerProcess(s, log) as t:
        with kmq.Client(settings=s) as client:
            client.send(queue, b"delayed", delay_s=3600)  # an entry in the tracker's table
            client.flush()
        config = wait_for(lambda: B.describe_topic_config(s, changelog_topic(s)), 30,
                          what="the changelog")
        assert config["delete.retention.ms"] == str(3 * 86_400_000)
        wait_for(lambda: D.table_dirs(s.data_dir), 30, what="the tables on disk")
        wait_for(lambda: scheduled(t, queue) == 1, 30, what="the delayed send in the table")
    # The worker stamped its data dir; pretend it last ran 4 days ago (> 90% of 3 days).
    D.stamp(s.data_dir, time.time() - 4 * 86_400)
    with TrackerProcess(s, log) as t:
        text = log.read_text()
        assert text.count("its tables are rebuilt from the changelog") == 1
        assert time.time() - D.last_seen_s(s.data_dir) < 600, "stamped again at start"
        # Restored from the changelog alone: the delayed send is still there.
        wait_for(lambda: scheduled(t, queue) == 1, 30, what="the delayed send restored")
    # A worker that ran all along (fresh stamp) but held no copy of its partitions for 4
    # days (given to other workers, back now): each partition is rebuilt as it opens.
    for partition in D.table_dirs(s.data_dir)[0].glob("tracker-*.db"):
        for f in partition.rglob("*"):
            os.utime(f, (time.time() - 4 * 86_400,) * 2)
    D.stamp(s.data_dir)
    with TrackerProcess(s, log) as t:
        wait_for(lambda: scheduled(t, queue) == 1, 30, what="the delayed send restored again")
        text = log.read_text()
        assert text.count("its tables are rebuilt from the changelog") == 1, "not the whole data dir"
        assert text.count("it is rebuilt from the changelog") == s.markers_partitions
    # What docs/deployment.md says to wait for is what the worker logs.
    assert "[^Worker]: Ready" in text and '"[^Worker]: Ready"' in (ROOT / "docs/deployment.md").read_text()


def test_a_worker_whose_start_up_check_fails_exits_with_the_fix_in_its_log(make_settings, artifacts):
    """'Refuses to start' means the process ends: a ConfigError from the start-up checks
    (on_first_start; here the topics' partition counts, as the embedded broker reports no
    broker configs to fail the retention checks) stops the worker with exit code 1."""
    from kmq.dev.devstack import TrackerProcess
    from tests.conftest import wait_for

    s = make_settings()
    log = artifacts / f"tracker-refused-{s.app_id}.log"
    worker = TrackerProcess(s.replace(queue_partitions=2), log).start(wait=False)
    process = worker.process
    try:
        wait_for(lambda: process.poll() is not None, 60, what="the worker to exit")
    finally:
        worker.stop()
    assert process.returncode == 1
    assert "ConfigError: topic " + s.queue_topic + " has 4 partitions but KMQ_QUEUE_PARTITIONS=2: set " \
        "KMQ_QUEUE_PARTITIONS=4" in log.read_text()


def test_a_missing_queues_topic_names_both_causes_and_the_acl_fix(make_settings):
    import pytest

    from kmq.errors import ConfigError
    from kmq.ops.queues_topic import QueueConfigs

    s = make_settings().replace(queues_topic="no-such-queues-topic")
    with pytest.raises(ConfigError, match=r"does not exist or may not be read.*READ and DESCRIBE.*kmq acls"):
        QueueConfigs(s, follow=False, timeout_s=5)

"""docs/scaling.md on a real broker: a queue's spread is how many queue partitions its
consumers read, so a spread above the queue topic's partition count is refused (it was
stored as asked and silently read as the count). No tracker: nothing here needs one."""

from __future__ import annotations

import pytest

from kmq.errors import ConfigError


def test_a_spread_above_the_queue_topics_partitions_is_refused_naming_the_count(
        make_client, shared_settings, queue):
    client = make_client(shared_settings)
    n = shared_settings.queue_partitions
    with pytest.raises(ConfigError, match=rf"spread={n + 1} is above the {n} partitions of topic "
                                          rf"{shared_settings.queue_topic}"):
        client.configure_queue(queue, spread=n + 1)
    assert client.queue_config(queue).spread == 1  # nothing was written
    assert client.configure_queue(queue, spread=n).spread == n  # every partition: allowed


def test_a_changelog_with_another_partition_count_than_the_markers_topic_is_refused_at_start(make_settings):
    """docs/scaling.md: markers partitions = changelog partitions, and the worker refuses to start
    on a count that differs. A changed KMQ_MARKERS_PARTITIONS under the same KMQ_APP_ID left the
    old changelog: the worker started and its markers agent crashed in a loop (Faust's
    PartitionsMismatch at the first table write, restarted by its supervisor), tracking nothing."""
    from confluent_kafka.admin import NewTopic

    from kmq.kafka import acls
    from kmq.kafka.admin import admin_client, ensure_topics

    s = make_settings()
    changelog = acls.changelog_topic(s)
    admin = admin_client(s)  # kept alive until the future resolves
    for fut in admin.create_topics([NewTopic(changelog, s.markers_partitions // 2, 1,
                                             config={"cleanup.policy": "compact"})]).values():
        fut.result(10)
    with pytest.raises(ConfigError, match=rf"{changelog} .* has {s.markers_partitions // 2} partitions but "
                                          rf"KMQ_MARKERS_PARTITIONS={s.markers_partitions}.*KMQ_APP_ID"):
        ensure_topics(s)


def test_kmq_queue_set_names_the_option_and_the_partition_count(shared_settings, queue):
    from click.testing import CliRunner

    from kmq.cli import main
    from kmq.dev.devstack import settings_env

    n = shared_settings.queue_partitions
    out = CliRunner().invoke(main, ["queue", "set", queue, "--spread", str(n + 1)],
                             env=settings_env(shared_settings))
    assert out.exit_code == 1, out.output
    assert f"--spread {n + 1}: spread={n + 1} is above the {n} partitions" in out.output
    assert "Traceback" not in out.output

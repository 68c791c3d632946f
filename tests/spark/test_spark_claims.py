"""docs/spark.md's claims a user trips over first: bad input gets a message naming the fix,
and the documented column lists are the columns, in that order."""

from __future__ import annotations

import pytest

from kmq.errors import ConfigError
from kmq.spark.source import kafka_schema

pytestmark = pytest.mark.slow


@pytest.fixture
def no_records(spark):
    def make(headers: bool):
        return spark.createDataFrame([], kafka_schema(headers))
    return make


def test_streaming_reads_are_refused_with_a_message():
    # "Streaming reads are not offered": Spark's default said NOT_IMPLEMENTED (a started
    # query here: "Python worker failed to connect back"), naming neither the source nor
    # batch reads. Spark asks the source for either reader when a stream starts.
    from kmq.spark.source import KafkaSource

    source = KafkaSource({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"})
    for make in (source.streamReader, source.simpleStreamReader):
        with pytest.raises(ConfigError, match="'kmq_kafka' does not offer streaming reads: "
                                              "use spark.read"):
            make(kafka_schema())


def test_header_columns_need_a_read_with_headers(no_records):
    from kmq.spark.events import dead_letters, queue_records

    for fn in (queue_records, dead_letters):
        with pytest.raises(ConfigError, match=f"{fn.__name__} needs the headers column: read "
                                              "the topic with includeHeaders=True"):
            fn(no_records(False))


def test_a_snapshot_codec_that_does_not_exist_is_a_config_error(no_records, tmp_path):
    from kmq.spark.changelog import snapshot

    with pytest.raises(ConfigError, match="codec='json' is not a codec: use one of raw, "
                                          "faust-json, tracker"):
        snapshot(no_records(False), str(tmp_path / "snap"), codec="json")
    assert not (tmp_path / "snap").exists()


def test_job_and_state_columns_are_the_documented_ones_in_order(no_records):
    from kmq.spark import jobs
    from kmq.spark.changelog import inflight_state
    from kmq.spark.events import dead_letters, marker_events, queue_records

    dels = jobs.deliveries(marker_events(no_records(False)), as_of_ms=0)
    records, dead = queue_records(no_records(True)), dead_letters(no_records(True))
    assert dels.columns == [
        "queue", "queue_partition", "offset", "delivery", "start_ms", "deadline_ms", "outcome",
        "settled_ms", "processing_ms", "reason", "settled_late"]
    assert jobs.never_acked(dels, records, dead).columns == [
        "queue", "message_id", "copies", "deliveries", "last_outcome", "dead_letter_reason",
        "first_ms"]
    assert inflight_state(no_records(False)).columns == [
        "kind", "queue", "queue_partition", "start", "end", "message_id", "pending_count",
        "pending", "started_ms", "timeout_ms", "next_deadline_ms", "due_ms", "groups",
        "changelog_partition", "changelog_offset", "key", "value"]
    assert jobs.percentiles(dels).columns == [
        "queue", "acked", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"]
    assert jobs.rates(dels, dead, records).columns == [
        "queue", "kind", "reason", "count", "total", "rate"]
    assert jobs.overdue(inflight_state(no_records(False)), 0).columns == [
        "queue", "queue_partition", "start", "end", "message_id", "cause", "reason", "count",
        "deadline_ms", "overdue_ms"]


def test_kafka_reader_takes_a_list_of_topics_to_subscribe(spark, broker, make_topic):
    # A list became the JSON text '["a", "b"]', split at its comma into two topics that do
    # not exist: '["a"' and ' "b"]'.
    from kmq.spark.session import kafka_reader
    from tests.spark.conftest import produce

    topics = [make_topic("claims-list"), make_topic("claims-list")]
    for t in topics:
        produce(broker.bootstrap_servers, t, [{"value": b"x"}])
    df = kafka_reader(spark, broker.bootstrap_servers, subscribe=topics).load()
    assert sorted(r.topic for r in df.select("topic").collect()) == sorted(topics)

"""kmq's Kafka data source on a real local Spark against the embedded broker."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from kmq.spark.session import kafka_format, kafka_reader
from tests.spark.conftest import produce

pytestmark = pytest.mark.slow

# The schema of Spark's official Kafka source (KafkaRecordToRowConverter), written out
# field by field so a drift in ours shows up here.
OFFICIAL = StructType([
    StructField("key", BinaryType(), True), StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True), StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True), StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True)])
OFFICIAL_HEADERS = StructType(OFFICIAL.fields + [StructField("headers", ArrayType(StructType([
    StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True), True)])


def rows(df):
    return [(r.partition, r.offset, r.key, r.value) for r in df.orderBy("partition", "offset").collect()]


def test_the_schema_is_the_official_sources_with_and_without_headers(spark, broker, make_topic):
    topic = make_topic("schema")
    assert kafka_format(spark) == "kmq_kafka"  # no official jar on this machine
    plain = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic).load()
    headers = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic,
                           includeHeaders=True).load()
    assert plain.schema == OFFICIAL
    assert headers.schema == OFFICIAL_HEADERS
    assert plain.count() == 0  # an empty topic reads as no rows


def test_records_come_back_whole_with_headers_timestamps_and_the_true_end(
        spark, broker, make_topic):
    topic = make_topic("whole", partitions=2)
    # Five single-record batches, then 100 records in one batch: ListOffsets(latest)
    # on the embedded broker says 6 for partition 0; the true end is 105.
    for i in range(5):
        produce(broker.bootstrap_servers, topic, [dict(
            value=b"v%d" % i, key=b"k", partition=0, timestamp=1_700_000_000_000 + i,
            headers=[("h", b"x"), ("empty", None)])], **{"linger.ms": 0})
    produce(broker.bootstrap_servers, topic, [dict(value=b"b%d" % i, key=None, partition=0)
                                              for i in range(100)], **{"linger.ms": 100})
    produce(broker.bootstrap_servers, topic, [dict(value=None, key=b"gone", partition=1)])
    df = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic, includeHeaders=True).load()
    got = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset) for r in got] == [(0, i) for i in range(105)] + [(1, 0)]
    first = got[0]
    assert (first.key, first.value, first.topic, first.timestampType) == (b"k", b"v0", topic, 0)
    assert int(first.timestamp.timestamp() * 1000) == 1_700_000_000_000
    assert [(h.key, h.value) for h in first.headers] == [("h", b"x"), ("empty", None)]
    assert got[5].key is None and got[5].headers is None
    assert got[-1].value is None and got[-1].key == b"gone"


def test_offset_ranges_assign_and_min_partitions(spark, broker, make_topic):
    topic = make_topic("ranges", partitions=3)
    produce(broker.bootstrap_servers, topic, [dict(value=b"%d-%d" % (p, i), partition=p)
                                              for p in range(3) for i in range(40)])
    read = lambda **o: kafka_reader(spark, broker.bootstrap_servers, **o).load()  # noqa: E731
    ranged = read(subscribe=topic, startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": 39}}),
                  endingOffsets=json.dumps({topic: {"0": 20, "1": 5, "2": -1}}))
    assert [(p, o) for p, o, _, _ in rows(ranged)] == \
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + [(2, 39)]
    assigned = read(assign=json.dumps({topic: [1]}), startingOffsets="earliest")
    assert {p for p, _, _, _ in rows(assigned)} == {1} and assigned.count() == 40
    split = read(subscribePattern=topic.replace("-", "."), minPartitions=7)
    assert split.rdd.getNumPartitions() == 7
    assert rows(split) == rows(read(subscribe=topic))  # same records, none twice
    with pytest.raises(Exception, match="past the end"):
        read(subscribe=topic, endingOffsets=json.dumps({topic: {"0": 99, "1": -1, "2": -1}})).count()
    lenient = read(subscribe=topic, endingOffsets=json.dumps({topic: {"0": 99, "1": -1, "2": -1}}),
                   failOnDataLoss=False)
    assert lenient.count() == 120


def test_offset_gaps_like_a_compacted_topics_are_read_to_the_end(spark, broker, make_topic):
    # Transaction commit markers take offsets no record has: the same gaps a compacted
    # topic has (the embedded broker does not compact). A range ending on a gap must
    # stop at the end of the partition, not wait for an offset that never comes.
    topic = make_topic("gaps")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic})
    p.init_transactions(15)
    for batch in range(3):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, b"%d-%d" % (batch, i), partition=0)
        p.commit_transaction(15)
    df = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic, minPartitions=4,
                      **{"kafkaConsumer.pollTimeoutMs": "5000"}).load()
    got = rows(df)
    offsets = [o for _, o, _, _ in got]
    assert [v for _, _, _, v in got] == [b"%d-%d" % (b, i) for b in range(3) for i in range(4)]
    assert offsets[-1] < 14 and len(set(offsets)) == 12
    assert offsets != list(range(12)), "expected offset gaps from the commit markers"


def test_a_range_ending_on_a_commit_marker_stops_at_the_next_record(
        spark, broker, make_topic, monkeypatch):
    # Offset 10 is the commit marker of a 10-record transaction; 3,000 plain records follow.
    # The task reading [0, 11) must stop at offset 11, not read on to the end of the partition.
    import confluent_kafka
    from pyspark.sql.pandas.types import to_arrow_schema

    from kmq.spark.fetch import read_range
    from kmq.spark.offsets import OffsetRange, consumer_config
    from kmq.spark.options import parse
    from kmq.spark.source import kafka_schema

    topic = make_topic("marker-end")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, b"tx-%d" % i, partition=0)
    p.commit_transaction(15)
    produce(broker.bootstrap_servers, topic, [dict(value=b"plain", partition=0)] * 3000)
    whole = [o for _, o, _, _ in rows(kafka_reader(spark, broker.bootstrap_servers,
                                                   subscribe=topic).load())]
    assert whole == list(range(10)) + list(range(11, 3011)), "expected the marker at offset 10"

    consume_calls = []

    class CountingConsumer(confluent_kafka.Consumer):
        def consume(self, *args, **kwargs):
            consume_calls.append(1)
            return super().consume(*args, **kwargs)

    monkeypatch.setattr(confluent_kafka, "Consumer", CountingConsumer)
    opts = parse({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic})
    batches = list(read_range(consumer_config(opts), OffsetRange(topic, 0, 0, 11),
                              to_arrow_schema(kafka_schema(), timezone="UTC"),
                              include_headers=False, fail_on_data_loss=True, poll_timeout_ms=10_000))
    values = [v for b in batches for v in b.column("value").to_pylist()]
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert (offsets, values) == (list(range(10)), [b"tx-%d" % i for i in range(10)])
    # One call per fetch the broker answers with, not one per record (it took 3,001).
    assert len(consume_calls) <= 10, len(consume_calls)
    monkeypatch.undo()
    # The same range through Spark.
    ranged = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic,
                          endingOffsets=json.dumps({topic: {"0": 11}})).load()
    assert [o for _, o, _, _ in rows(ranged)] == list(range(10))


def test_latest_value_per_key_applies_tombstones(spark, broker, make_topic, tmp_path):
    from kmq.spark.changelog import decode_faust_json, latest_per_key, snapshot

    topic = make_topic("changelog", partitions=2)
    ns = {"__faust": {"ns": "whatever.module.Order"}}
    writes = [("a", {"n": 1}), ("b", {"n": 2}), ("a", {"n": 3}), ("c", {"n": 4}), ("b", None),
              ("c", {"n": 5})]
    produce(broker.bootstrap_servers, topic, [dict(
        key=json.dumps(k).encode(), value=None if v is None else json.dumps({**v, **ns}).encode(),
        partition=ord(k) % 2) for k, v in writes])
    records = kafka_reader(spark, broker.bootstrap_servers, subscribe=topic).load()
    state = decode_faust_json(latest_per_key(records), value_schema="n int")
    got = {r.key_text: (r.value_data.n, r.faust_ns) for r in state.collect()}
    assert got == {"a": (3, "whatever.module.Order"), "c": (5, "whatever.module.Order")}
    n = snapshot(records, str(tmp_path / "snap"), codec="faust-json", value_schema="n int")
    back = spark.read.parquet(str(tmp_path / "snap"))
    assert n == 2 and sorted(r.key_text for r in back.collect()) == ["a", "c"]


def test_the_official_kafka_format_is_chosen_when_its_class_is_on_the_classpath(spark, monkeypatch):
    import kmq.spark.session as session

    assert not session.official_kafka_available(spark)
    # Any class the JVM can load stands in for the connector's provider class.
    monkeypatch.setattr(session, "OFFICIAL_PROVIDER", "org.apache.spark.sql.SparkSession")
    assert session.kafka_format(spark) == "kafka"


def test_credentials_in_librdkafka_names_keep_kmqs_source_when_the_official_is_present(
        spark, broker, make_topic, monkeypatch):
    # The Java client would ignore kafka.sasl.username & co. and connect without them.
    import kmq.spark.session as session
    from kmq.settings import Settings

    topic = make_topic("security-names")
    monkeypatch.setattr(session, "OFFICIAL_PROVIDER", "org.apache.spark.sql.SparkSession")
    sasl = Settings.from_env({}, bootstrap_servers=broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_username="reports", sasl_password="secret")
    # Loading resolves the format; the schema comes without contacting the broker.
    assert kafka_reader(spark, settings=sasl, subscribe=topic).load().schema == OFFICIAL
    assert kafka_reader(spark, broker.bootstrap_servers, subscribe=topic,
                        **{"kafka.ssl.ca.location": "/etc/ca.pem"}).load().schema == OFFICIAL
    # Without such options the official format is chosen (and is missing on this machine).
    with pytest.raises(Exception, match="Failed to find data source: kafka"):
        kafka_reader(spark, broker.bootstrap_servers, subscribe=topic).load()

"""The production profile's client configs, and that every kmq client is built from them.

The dicts given to librdkafka and Faust come from ``kmq.kafka.profiles``; these
tests read them directly, hand them to real librdkafka clients (which reject
unknown or inconsistent properties at construction, no broker needed), and
capture what the SDK and the tracker actually pass to librdkafka.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer

from kmq.kafka import profiles
from kmq.kafka.admin import topic_specs
from kmq.errors import ConfigError
from kmq.settings import Settings

NOWHERE = "127.0.0.1:1"  # nothing listens: constructing a client must not need a broker


def production(**env: str) -> Settings:
    return Settings.from_env({"KMQ_PROFILE": "production", "KMQ_BOOTSTRAP_SERVERS": NOWHERE, **env})


def embedded(**env: str) -> Settings:
    return Settings.from_env({"KMQ_PROFILE": "embedded", "KMQ_BOOTSTRAP_SERVERS": NOWHERE, **env})


def test_production_producers_wait_for_every_in_sync_replica_and_never_duplicate():
    conf = profiles.producer_config(production())
    assert conf["acks"] == "all"
    assert conf["enable.idempotence"] is True
    assert conf["max.in.flight.requests.per.connection"] <= 5  # idempotence keeps order up to 5
    assert conf["message.timeout.ms"] == 300_000 and conf["request.timeout.ms"] == 30_000
    assert conf["partitioner"] == "murmur2_random"
    assert profiles.producer_config(production(KMQ_DELIVERY_TIMEOUT_MS="60000"))[
        "message.timeout.ms"] == 60_000


def test_credits_go_out_in_order_and_at_once_without_idempotence():
    conf = profiles.soft_marker_producer_config(production())
    assert conf["enable.idempotence"] is False  # no producer id to wait for (~0.5 s)
    assert conf["max.in.flight.requests.per.connection"] == 1  # order kept through retries
    assert conf["acks"] == "all" and conf["partitioner"] == "murmur2_random"


def test_production_group_session_is_short_enough_for_a_prompt_failover():
    conf = profiles.group_consumer_config(production(), "kmq.orders")
    assert conf["group.id"] == "kmq.orders"
    # 10 s (issue 16): a crashed worker's partitions move well within a 30 s visibility timeout.
    assert (conf["session.timeout.ms"], conf["heartbeat.interval.ms"]) == (10_000, 1_666)
    assert conf["session.timeout.ms"] < production().visibility_timeout_s * 1000 / 2
    assert conf["max.poll.interval.ms"] == 300_000
    assert conf["isolation.level"] == "read_committed"


def test_readers_never_commit_and_keep_their_security():
    s = production(KMQ_SECURITY_PROTOCOL="SASL_SSL", KMQ_SASL_MECHANISM="PLAIN",
                   KMQ_SASL_USERNAME="u", KMQ_SASL_PASSWORD="p")
    conf = profiles.reader_config(s, "kmq.orders.lanes", fetch_wait_ms=50, eof=False)
    assert conf["group.id"] == "kmq.orders.lanes"
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert (conf["fetch.wait.max.ms"], conf["enable.partition.eof"]) == (50, False)
    assert conf["security.protocol"] == "SASL_SSL"  # the same address and security as every client
    RdConsumer(conf).close()  # librdkafka accepts it
    assert profiles.reader_config(s, "g", fetch_wait_ms=10, eof=True)["enable.partition.eof"] is True


def test_the_embedded_profile_only_shortens_group_timeouts():
    conf = profiles.group_consumer_config(embedded(), "g")
    assert (conf["session.timeout.ms"], conf["heartbeat.interval.ms"]) == (6_000, 1_000)
    prod, emb = profiles.producer_config(production()), profiles.producer_config(embedded())
    # Durability is the same on the dev broker; only the codec differs (lz4 measured faster).
    assert prod.pop("compression.type") == "lz4" and emb.pop("compression.type") == "none"
    assert prod == emb, "durability is the same on the dev broker"


def test_readers_wait_long_on_kafka_and_short_on_the_embedded_broker():
    # Apache Kafka answers a fetch as soon as records are there: a long wait costs no latency
    # and spares empty fetches; the embedded broker answers only when the wait is over.
    for wait in (profiles.lane_fetch_wait_ms, profiles.reference_fetch_wait_ms, profiles.dispatcher_fetch_wait_ms):
        assert wait(production()) >= 100 and wait(embedded()) <= 50, wait.__name__
    assert profiles.reference_fetch_wait_ms(production()) == 500


def test_kmq_compression_sets_every_producers_codec_and_refuses_unknown_ones():
    assert profiles.producer_config(embedded(KMQ_COMPRESSION="zstd"))["compression.type"] == "zstd"
    assert profiles.producer_config(production(KMQ_COMPRESSION="none"))["compression.type"] == "none"
    with pytest.raises(ConfigError, match="KMQ_COMPRESSION"):
        embedded(KMQ_COMPRESSION="brotli")


@pytest.mark.parametrize("session_ms", [6_000, 20_000, 45_000, 120_000])
def test_one_session_timeout_drives_librdkafka_and_faust_alike(session_ms):
    s = production(KMQ_SESSION_TIMEOUT_MS=str(session_ms))
    rd = profiles.group_consumer_config(s, "g")
    faust = profiles.faust_options(s)
    assert rd["session.timeout.ms"] == session_ms == faust["broker_session_timeout"] * 1000
    assert rd["heartbeat.interval.ms"] == faust["broker_heartbeat_interval"] * 1000
    assert 3 * rd["heartbeat.interval.ms"] <= session_ms
    assert rd["max.poll.interval.ms"] > session_ms  # librdkafka refuses otherwise
    # Faust refuses a session timeout above its request timeout; aiokafka waits out a rebalance.
    assert faust["broker_request_timeout"] > faust["broker_rebalance_timeout"] >= faust[
        "broker_session_timeout"]


def test_faust_production_options_are_durable():
    opts = profiles.faust_options(production())
    assert opts["producer_acks"] == -1
    assert opts["topic_replication_factor"] == 3
    assert opts["table_standby_replicas"] == 1
    assert opts["producer_request_timeout"] == 300.0
    assert "producer_max_batch_size" not in opts, "Tansu's workaround stays in the embedded profile"
    assert profiles.faust_options(production(KMQ_STANDBY_REPLICAS="2"))["table_standby_replicas"] == 2
    assert profiles.faust_options(production(KMQ_STANDBY_REPLICAS="0"))["table_standby_replicas"] == 0


def test_faust_embedded_options_keep_tansus_workarounds():
    opts = profiles.faust_options(embedded())
    assert "producer_max_batch_size" not in opts  # recovery reads to the true end instead
    assert opts["topic_replication_factor"] == 1
    assert opts["broker_session_timeout"] == 6.0 and opts["broker_heartbeat_interval"] == 1.0


def test_production_topics_replicate_three_ways_and_need_two_in_sync():
    for spec in topic_specs(production()):
        assert spec.replication_factor == 3
        assert spec.config["min.insync.replicas"] == "2"
    assert profiles.topic_durability_config(production(KMQ_REPLICATION_FACTOR="1")) == {
        "min.insync.replicas": "1"}
    assert profiles.topic_durability_config(embedded()) == {}
    assert profiles.topic_durability_config(embedded(KMQ_MIN_INSYNC_REPLICAS="1")) == {
        "min.insync.replicas": "1"}


def test_min_insync_replicas_above_the_replication_factor_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match=r"KMQ_MIN_INSYNC_REPLICAS=3 .*KMQ_REPLICATION_FACTOR.*at most 2"):
        production(KMQ_REPLICATION_FACTOR="2", KMQ_MIN_INSYNC_REPLICAS="3")
    with pytest.raises(ConfigError, match="KMQ_DELIVERY_TIMEOUT_MS=1000 .*at least 30000"):
        production(KMQ_DELIVERY_TIMEOUT_MS="1000")
    with pytest.raises(ConfigError, match="KMQ_STANDBY_REPLICAS=-1"):
        production(KMQ_STANDBY_REPLICAS="-1")


def test_queue_retention_must_outlast_the_longest_delay_with_the_fix():
    with pytest.raises(ConfigError, match=r"KMQ_QUEUE_RETENTION_MS=604800000 \(7.0 days\) does not "
                                          r"exceed KMQ_MAX_DELAY_S=604800 .*raise KMQ_QUEUE_RETENTION_MS"):
        production(KMQ_QUEUE_RETENTION_MS="604800000")
    assert production(KMQ_QUEUE_RETENTION_MS="604800000", KMQ_MAX_DELAY_S="86400").max_delay_s == 86400
    with pytest.raises(ConfigError, match="KMQ_VISIBILITY_TIMEOUT_S=7200"):
        production(KMQ_QUEUE_RETENTION_MS="3600000", KMQ_MAX_DELAY_S="60",
                   KMQ_VISIBILITY_TIMEOUT_S="7200")


@pytest.mark.parametrize("make", [production, embedded])
def test_librdkafka_accepts_every_profile_config(make):
    s = make()
    quiet = {"log_level": 0}
    for conf in (profiles.producer_config(s), profiles.soft_marker_producer_config(s)):
        producer = RdProducer({**conf, **quiet})
        producer.flush(0)
    consumer = RdConsumer({**profiles.group_consumer_config(s, "g"), **quiet})
    consumer.close()


# -- what the SDK and the tracker pass to librdkafka -----------------------------------


class Captured(Exception):
    """Raised by a fake client constructor once it has recorded its config."""


def capture(configs: list, then_raise: bool):
    def construct(conf: dict):
        configs.append(conf)
        if then_raise:
            raise Captured
        return _Inert()
    return construct


class _Inert:
    def __getattr__(self, name):
        return lambda *a, **k: None


def test_the_sdk_producer_is_built_from_the_profile(monkeypatch):
    import kmq.client
    import kmq.kafka.producer_start

    configs: list = []
    monkeypatch.setattr(kmq.kafka.producer_start, "Producer", capture(configs, then_raise=True))
    client = kmq.client.Client(settings=production())
    with pytest.raises(Captured):
        client._get_producer()
    assert configs[0].items() >= profiles.producer_config(client.settings).items()


def test_the_sdk_consumer_is_built_from_the_profile(monkeypatch):
    import kmq.consumer.partition_source
    import kmq.kafka.producer_start

    consumers: list = []
    producers: list = []
    monkeypatch.setattr(kmq.consumer.partition_source, "KafkaConsumer", capture(consumers, then_raise=True))
    monkeypatch.setattr(kmq.kafka.producer_start, "Producer", capture(producers, then_raise=False))
    s = production().replace(dispatch="partition")  # the group consumer's config
    with pytest.raises(Captured):
        kmq.consumer.Consumer(s, "orders", queue_topic_partitions=8, markers_topic_partitions=8)
    assert consumers[0].items() >= profiles.group_consumer_config(s, "kmq.orders").items()
    assert producers[0].items() >= profiles.producer_config(s).items()


def test_the_trackers_own_clients_are_built_from_the_profile(monkeypatch):
    import agents.payloads
    import agents.redeliver

    producers: list = []
    readers: list = []
    monkeypatch.setattr(agents.redeliver, "Producer", capture(producers, then_raise=True))
    monkeypatch.setattr(agents.payloads, "PatientReader", capture(readers, then_raise=True))
    s = production()
    r = agents.redeliver.Redeliverer(s, configs=lambda: None)
    with pytest.raises(Captured):
        r._get_producer()
    with pytest.raises(Captured):
        r.payloads.consumer()
    assert producers[0].items() >= profiles.producer_config(s).items()
    assert readers[0].items() >= profiles.client_config(s).items()


def test_the_tracker_app_takes_its_durability_from_the_profile():
    from app.settings import faust_options

    s = production()
    opts = faust_options(s)
    assert opts.items() >= profiles.faust_options(s).items()
    assert opts["broker"] == "kafka://127.0.0.1:1"
    assert "broker_credentials" not in opts


def test_a_started_producer_asks_for_its_topic_at_once_and_shrugs_off_a_broker_that_is_down(monkeypatch):
    # Its first record waited for librdkafka's 500 ms producer-id timer (kmq/kafka/producer_start.py).
    from confluent_kafka import KafkaException

    import kmq.kafka.producer_start as start

    asked = []

    class Made:
        def __init__(self, conf):
            self.conf = conf

        def list_topics(self, topic, timeout):
            asked.append((topic, timeout))
            raise KafkaException("down")

    monkeypatch.setattr(start, "Producer", Made)
    p = start.started_producer({"a": 1}, "kmq.markers")
    assert p.conf == {"a": 1} and asked == [("kmq.markers", start.CONNECT_TIMEOUT_S)]

"""docs/spark.md's claims about bad input, checked without Spark: options and `kmq spark` flags."""

import socket

import pytest
from click.testing import CliRunner

from kmq.errors import ConfigError
from kmq.spark.offsets import check_named_partitions
from kmq.spark.options import parse

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("subscribe", [",", " , ,"])
def test_a_subscribe_naming_no_topic_is_refused_not_an_empty_read(subscribe):
    # It read nothing and said nothing: a typo'd list looked like empty topics.
    with pytest.raises(ConfigError, match="option subscribe=.* names no topic"):
        parse({**BASE, "subscribe": subscribe})


@pytest.mark.parametrize("name", ["startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
                                  "startingTimestamp", "endingTimestamp",
                                  "startingOffsetsByTimestampStrategy"])
def test_unsupported_options_are_refused_by_the_name_the_user_wrote(name):
    # Spark lower-cases option names; the message named "startingtimestamp".
    with pytest.raises(ConfigError, match=f"option {name} is not supported"):
        parse({**BASE, "subscribe": "t", name.lower(): "1"})


@pytest.mark.parametrize("assign", ['{"t": [1.5]}', '{"t": [-1]}', '{"t": [true]}', '{"t": ["0"]}'])
def test_assign_takes_partition_numbers_only(assign):
    # 1.5 became partition 1 silently.
    with pytest.raises(ConfigError, match="option assign="):
        parse({**BASE, "assign": assign})


@pytest.mark.parametrize("args, words", [
    (["--connect-timeout-s", "-1"], "--connect-timeout-s"),
    (["--connect-timeout-s", "0"], "--connect-timeout-s"),
    (["--show", "-1"], "--show"),
    (["--grace-ms", "-5"], "--grace-ms"),
    (["--as-of-ms", "0"], "--as-of-ms"),  # 0 meant "now"
    # Spark refused it after the JVM started: "Java gateway process exited before sending
    # its port number", naming neither --master nor what it takes.
    (["--master", "bogus"], "--master"),
    (["--master", "localhost"], "--master"),
    # Spark: "Asked to run locally with 0 threads", after the JVM started.
    (["--master", "local[0]"], "runs no thread"),
    (["--master", "local[00,3]"], "runs no thread"),
])
def test_job_flags_out_of_range_are_usage_errors_before_any_broker_check(args, words):
    # --connect-timeout-s -1 waited for a broker forever (librdkafka: a negative timeout is none).
    from kmq.cli import main

    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        address = "%s:%d" % closed.getsockname()
        result = CliRunner().invoke(main, ["spark", "overdue", "--out", "/nonexistent/out",
                                           "--bootstrap-servers", address, *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Invalid value" in result.output


@pytest.mark.parametrize("name", ["startingOffsets", "endingOffsets"])
def test_json_offsets_for_partitions_not_read_are_refused(name):
    # {"t": {"0": 1, "9": 1}} on a 1-partition topic ignored t/9 without a word (the
    # official source refuses it).
    o = parse({**BASE, "subscribe": "t", name: '{"t": {"0": 1, "9": 1}, "u": {"0": 1}}'})
    with pytest.raises(ConfigError, match=f"option {name} names partitions the read does "
                                          "not cover: t/9, u/0"):
        check_named_partitions(o, [("t", 0)])
    check_named_partitions(parse({**BASE, "subscribe": "t", name: '{"t": {"0": 1}}'}), [("t", 0)])


def test_a_pattern_does_not_select_kafkas_internal_topics():
    # ".*" read __consumer_offsets too (the official source's Java consumer excludes it).
    o = parse({**BASE, "subscribePattern": ".*"})
    assert o.topic_matches("kmq.dlq")
    assert not any(map(o.topic_matches, ("__consumer_offsets", "__transaction_state")))
    assert parse({**BASE, "subscribe": "__consumer_offsets"}).topic_matches("__consumer_offsets")


@pytest.mark.parametrize("name, fix", [("kafka.sasl.jaas.config", "kafka.sasl.username"),
                                       ("kafka.ssl.truststore.location", "kafka.ssl.ca.location"),
                                       ("kafka.ssl.keystore.password", "kafka.ssl.key.location")])
def test_java_client_credentials_are_refused_naming_the_librdkafka_option_to_give(name, fix):
    # librdkafka refused them in its own words ("Java JAAS configuration is not supported"),
    # naming neither the option nor what to give instead
    with pytest.raises(ConfigError, match=rf"option {name} is not one .*{fix}"):
        parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", name: "x"})


@pytest.mark.parametrize("master", ["local", "local[1]", "local[*]", "local[2,3]", "local[2 , 3]",
                                    "local[*,1]", "local-cluster[2, 1, 1024]", "yarn",
                                    "spark://h:7077", "k8s://https://h:6443"])
def test_spark_master_forms_spark_takes_pass_the_check(master):
    from kmq.spark.cli import _check_master

    assert _check_master(None, None, master) == master


def test_the_printschema_sample_in_the_docs_is_the_schema_spark_prints():
    # The sample showed headers flat and no "(nullable = true)": not what a user sees.
    from pathlib import Path

    from kmq.spark.source import kafka_schema

    doc = (Path(__file__).parents[2] / "docs" / "spark.md").read_text()
    sample = doc.split("df.printSchema()\n```\n\n```\n", 1)[1].split("```", 1)[0]
    assert sample == kafka_schema(include_headers=True).treeString()

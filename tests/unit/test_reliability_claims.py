"""docs/reliability.md read as a user: claims that need no broker.

"pass ``config={"queued.max.messages.kbytes": ...}`` to ``client.consumer``": a config
librdkafka refuses (an unknown property, a bad value, not a dict) is a ConfigError naming
``config=`` and the property, in either dispatch mode, before anything connects (it was a
bare ``cimpl.KafkaException`` from deep inside a reader's constructor).
"""

from __future__ import annotations

import pytest

from kmq.consumer.facade import Consumer
from kmq.errors import ConfigError
from kmq.protocol.lane_layout import LaneLayout
from kmq.settings import Settings

# No broker listens here: the config is refused before anything connects.
SETTINGS = Settings.from_env({}, bootstrap_servers="127.0.0.1:9", profile="embedded")
LANES = LaneLayout("kmq.deliveries", 1, 1)


def make(mode: str, **options) -> Consumer:
    settings = SETTINGS.replace(dispatch=mode)
    return Consumer(settings, "orders", queue_topic_partitions=1, markers_topic_partitions=1,
                    lane_layout=LANES if mode == "shared" else None, **options)


def test_the_prefetch_bound_the_doc_names_is_taken():
    # (a shared consumer asks the broker for its lane's ends as it starts: see the
    # integration file for both modes against a broker)
    make("partition", config={"queued.max.messages.kbytes": 16384}).close(timeout_s=1)


@pytest.mark.parametrize("mode", ["shared", "partition"])
@pytest.mark.parametrize("config, named", [
    ({"no.such.property": 1}, "no.such.property"),
    ({"queued.max.messages.kbytes": "abc"}, "queued.max.messages.kbytes"),
])
def test_a_config_librdkafka_refuses_is_a_config_error_naming_it(mode, config, named):
    with pytest.raises(ConfigError) as err:
        make(mode, config=config)
    assert "config=" in str(err.value) and named in str(err.value), err.value


@pytest.mark.parametrize("config", [["queued.max.messages.kbytes", 1], "x=1", {1: 2}])
def test_a_config_that_is_not_a_dict_of_property_names_is_refused_by_name(config):
    with pytest.raises(ConfigError, match=r"config=.* must be a dict of librdkafka property names"):
        make("partition", config=config)


# -- `python -m bench.chaos`: the run the doc names, with a wrong option ------------------
# It was a traceback after the broker had started (``--ordered-queues 2`` without
# ``--dispatch shared``), or a run that went on without meaning (``--trackers 0``,
# ``--messages 0``, ``--transactional-queues 5 --queues 3``): now a usage error (exit 2).

@pytest.mark.parametrize("args, named", [
    (["--ordered-queues", "2"], "--ordered-queues"),
    (["--ordered-queues", "4", "--queues", "3", "--dispatch", "shared"], "--ordered-queues"),
    (["--groups", "0", "--ordered-queues", "1", "--dispatch", "shared"], "--groups"),
    (["--trackers", "0"], "--trackers"),
    (["--queues", "0"], "--queues"),
    (["--messages", "0"], "--messages"),
    (["--kills", "-1"], "--kills"),
    (["--seconds", "0"], "--seconds"),
    (["--seconds", "nan"], "--seconds"),
    (["--work-ms", "-5"], "--work-ms"),
    (["--transactional-queues", "5", "--queues", "3"], "--transactional-queues"),
    (["--lanes", "-1"], "--lanes"),
])
def test_a_bad_chaos_option_is_a_usage_error_naming_it_before_anything_starts(args, named, capsys):
    from bench.chaos_config import parse_config  # parses only: nothing starts here

    with pytest.raises(SystemExit) as done:
        parse_config(args)
    err = capsys.readouterr().err
    assert done.value.code == 2 and f"error: {named} " in err, err


def test_the_doc_s_chaos_commands_parse():
    from bench.chaos_config import parse_config

    for line in ("--kills 100 --messages 5000 --queues 3 --seconds 90 --trackers 3 --seed 1 --transactional-queues 1",
                 "--kills 100 --messages 3000 --queues 3 --seconds 90 --trackers 3 --seed 1 "
                 "--transactional-queues 0 --dispatch shared --work-ms 20",
                 "--dispatch shared --ordered-queues 2 --queues 2 --groups 10 --messages 1000 --kills 30 "
                 "--seconds 60 --trackers 3 --seed 1 --work-ms 100"):
        _, cfg = parse_config(line.split())
        assert cfg.kills in (100, 30)


def test_a_chaos_config_out_of_range_is_refused_naming_the_field():
    from bench.chaos_config import ChaosConfig

    with pytest.raises(ConfigError, match="ordered_queues=2 needs dispatch='shared'"):
        ChaosConfig(queues=2, ordered_queues=2)
    with pytest.raises(ConfigError, match="trackers=0"):
        ChaosConfig(trackers=0)
    ChaosConfig(queues=1)  # the defaults of the other fields fit one queue


# -- Message.reject's reason: the markers' limit is "UTF-8 text of at most 4 KiB" ----------

def test_a_reject_reason_that_is_not_utf8_text_is_a_config_error_naming_it():
    from tests.unit.test_message_headers import message

    m = message([])
    with pytest.raises(ConfigError, match=r"reason=.* is not UTF-8 text"):
        m.reject("bad \ud800 surrogate")  # it raised UnicodeEncodeError from deep inside
    assert m.settled is None  # and the message is still held


def test_transactional_queues_are_partition_mode_s_and_default_to_none_when_shared(capsys):
    from bench.chaos_config import ChaosConfig, parse_config

    # It was silently ignored with --dispatch shared (a shared consumer writes no STARTs).
    with pytest.raises(SystemExit) as done:
        parse_config(["--dispatch", "shared", "--transactional-queues", "1"])
    assert done.value.code == 2 and "error: --transactional-queues " in capsys.readouterr().err
    assert parse_config(["--dispatch", "shared"])[1].transactional_queues == 0
    assert parse_config([])[1].transactional_queues == 1
    assert ChaosConfig(dispatch="shared").transactional_queues == 0
    with pytest.raises(ConfigError, match="transactional_queues=1 needs dispatch='partition'"):
        ChaosConfig(dispatch="shared", transactional_queues=1)

"""docs/cli.md and docs/configuration.md as a user reads them, without a broker: bad option
values and bad settings are one clear error naming the option or variable and the fix (exit
status 2 for a bad option, as click's own, 1 for a failed command), never a traceback, and
never after a message was sent or a purge written."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

import kmq
from kmq.cli import main
from kmq.errors import ConfigError
from kmq.ops import deadletters
from kmq.settings import Settings

# A broker nobody listens on: an option checked before the broker gives exit 2, not the
# broker's error (exit 1 after --connect-timeout-s).
DOWN = ["--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "0.5"]


def run(*args: str):
    out = CliRunner().invoke(main, list(args))
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exc_info
    assert "Traceback" not in out.output
    return out


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_kmq_dev_refuses_a_web_port_that_is_not_a_port(port):
    out = run("dev", "--web-port", port, "--no-demo")
    assert out.exit_code == 2 and "--web-port" in out.output and "0<=x<=65535" in out.output


@pytest.mark.parametrize("seconds", ["-1", "0", "nan", "inf"])
def test_stats_timeout_must_be_seconds_above_zero(seconds):
    out = run("stats", "--url", "http://127.0.0.1:1", "--timeout-s", seconds)
    assert out.exit_code == 2 and "--timeout-s" in out.output and "above 0" in out.output


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_stats_limit_is_named_before_any_tracker_is_asked(limit):
    out = run("stats", "--url", "http://127.0.0.1:1", "--limit", limit)
    assert out.exit_code == 2 and "--limit" in out.output and "1 or more" in out.output


def test_config_reference_to_a_directory_that_does_not_exist_is_one_error_line(tmp_path):
    target = tmp_path / "missing" / "configuration.md"
    out = run("config-reference", "--out", str(target))
    assert out.exit_code == 1
    assert out.output.startswith(f"error: cannot write {target}") and out.output.count("\n") == 1


def test_config_reference_prints_and_writes_the_same_text(tmp_path):
    printed = run("config-reference")
    assert printed.exit_code == 0 and printed.output.startswith("# Configuration reference")
    target = tmp_path / "configuration.md"
    assert run("config-reference", "--out", str(target)).exit_code == 0
    assert target.read_text() == printed.output


@pytest.mark.parametrize("repeat", ["0", "-3", "1000001", "3000000000"])
def test_send_repeat_outside_one_to_a_million_is_refused_not_sent(repeat):
    # 3e9 was taken, built a list of 3e9 payloads and grew to 23 GB before the kernel killed it.
    out = run("send", *DOWN, "orders", "x", "--repeat", repeat)
    assert out.exit_code == 2 and "--repeat" in out.output and "1<=x<=1000000" in out.output


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_queue_purge_timeout_must_be_seconds_above_zero(seconds):
    out = run("queue", "purge", *DOWN, "orders", "--yes", "--timeout-s", seconds)
    assert out.exit_code == 2 and "--timeout-s" in out.output and "above 0" in out.output


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf"])
def test_dlq_redrive_rate_must_be_a_finite_rate_of_at_least_one_in_100_s(rate):
    out = run("dlq", "redrive", *DOWN, "orders", "--rate", rate)
    assert out.exit_code == 2 and "--rate" in out.output and "at least 0.01" in out.output


@pytest.mark.parametrize("args", [("dlq", "redrive", "orders", "--limit", "-1"),
                                  ("dlq", "redrive", "orders", "--batch-size", "0"),
                                  ("dlq", "list", "orders", "--limit", "-1")])
def test_dlq_counts_below_their_minimum_are_refused(args):
    out = run(*args[:2], *DOWN, *args[2:])
    assert out.exit_code == 2 and args[-2] in out.output and ("x>=" in out.output or "1 or more" in out.output)


def test_the_sdk_refuses_a_negative_limit_and_a_rate_that_is_not_finite():
    settings = Settings.from_env({}, bootstrap_servers="127.0.0.1:1")
    # Checked before any broker is asked (the slice [:-1] moved all but the last one).
    with pytest.raises(ConfigError, match=r"limit=-1 .*0 or more"):
        deadletters.redrive(settings, "orders", limit=-1)
    with pytest.raises(ConfigError, match=r"limit=-1 .*0 or more"):
        deadletters.list_dead_letters(settings, "orders", limit=-1)
    # ... and a rate below one message in 100 s (1e-300 moved one, then overflowed time.sleep).
    for rate in (math.nan, math.inf, 1e-300, 0.001, 0):
        with pytest.raises(ConfigError, match=r"rate_per_s=.* must be a finite number of at least 0.01"):
            deadletters.redrive(settings, "orders", rate_per_s=rate)


def test_the_send_line_lists_ids_only_when_there_are_some():
    from kmq.cli.ops import sent_line
    assert sent_line("orders", 0, []) == "sent 0 messages to orders"
    assert sent_line("orders", 1, ["a-1"]) == "sent 1 message to orders: a-1"
    assert sent_line("orders", 6, [f"a-{i}" for i in range(6)]) == "sent 6 messages to orders"
    assert sent_line("orders", 3_000_000, [f"a-{i}" for i in range(6)]) == "sent 3000000 messages to orders"


# -- settings (docs/configuration.md) ------------------------------------------------------

@pytest.mark.parametrize("name", ["KMQ_VISIBILITY_TIMEOUT_S", "KMQ_MAX_PROCESSING_S", "KMQ_MAX_DELAY_S"])
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_seconds_variable_must_be_finite(name, raw):
    with pytest.raises(ConfigError, match=f"{name}={raw!r}.*finite"):
        Settings.from_env({name: raw})


def test_a_whole_number_variable_asks_for_a_whole_number():
    with pytest.raises(ConfigError, match=r"KMQ_QUEUE_PARTITIONS='8.0' is not a whole number"):
        Settings.from_env({"KMQ_QUEUE_PARTITIONS": "8.0"})


def test_a_variable_that_may_be_zero_says_so():
    with pytest.raises(ConfigError, match=r"KMQ_REPLICATION_FACTOR=-1 is negative: give 0 or more"):
        Settings.from_env({"KMQ_REPLICATION_FACTOR": "-1"})
    with pytest.raises(ConfigError, match=r"KMQ_QUEUE_PARTITIONS=0 is not above 0: give a positive number"):
        Settings.from_env({"KMQ_QUEUE_PARTITIONS": "0"})


@pytest.mark.parametrize("keyword, value, expected", [
    ("web_port", "6066", "web_port='6066' .*whole number"),
    ("queue_partitions", "8", "queue_partitions='8' .*whole number"),
    ("max_deliveries", True, "max_deliveries=True .*whole number"),
    ("visibility_timeout_s", "30", "visibility_timeout_s='30' .*number"),
    ("visibility_timeout_s", math.nan, "visibility_timeout_s=nan .*finite"),
    ("profile", 3, "profile=3 .*text"),
])
def test_a_client_keyword_of_the_wrong_type_names_the_keyword(keyword, value, expected):
    with pytest.raises(ConfigError, match=expected):
        kmq.Client(**{keyword: value})


def test_a_header_without_equals_is_refused_before_the_broker_is_asked():
    out = run("send", *DOWN, "orders", "x", "-H", "nameonly")
    assert out.exit_code == 2 and "--header" in out.output and "'nameonly': use NAME=VALUE" in out.output


def test_every_option_docs_cli_names_exists():
    """Each `--option` in docs/cli.md's table row of a command is an option of that command."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    rows = [r for r in text.splitlines() if r.startswith("| `kmq ")]
    assert rows
    for row in rows:
        synopsis = row.split("`")[1]
        words = synopsis.split()[1:]
        command, path = main, []
        while words and hasattr(command, "commands") and words[0] in command.commands:
            command = command.commands[words.pop(0)]
            path.append(command.name)
        if not hasattr(command, "params"):
            continue
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for option in re.findall(r"(--[a-z][a-z-]*)", row):
            if path[:1] in (["spark"], ["bench"]):
                continue
            assert option in known or option == "--help", (path, option)


@pytest.mark.parametrize("args", [["acls"], ["acls", "--commands"], ["stats", "--url", "http://127.0.0.1:1"],
                                  ["send", "orders", "x"], ["queue", "show", "orders"]])
def test_a_bad_variable_is_one_error_line_naming_it(args):
    out = CliRunner().invoke(main, args, env={"KMQ_WEB_PORT": "abc"})
    assert out.exit_code == 1, out.output
    assert out.output == "error: KMQ_WEB_PORT='abc' is not a whole number: give digits only\n"


def test_a_variable_set_to_the_empty_string_counts_as_unset():
    s = Settings.from_env({"KMQ_GROUP_PREFIX": "", "KMQ_WEB_PORT": "", "KMQ_PROFILE": ""})
    assert (s.group_prefix, s.web_port, s.profile) == ("kmq.", 6066, "production")


@pytest.mark.parametrize("seconds", ["-1", "nan", "inf"])
def test_send_delay_must_be_finite_seconds_from_zero_named_as_the_option(seconds):
    out = run("send", *DOWN, "orders", "x", "--delay-s", seconds)
    assert out.exit_code == 2 and "--delay-s" in out.output and "0 or more" in out.output


def test_a_path_is_taken_as_its_text():
    from pathlib import Path
    assert Settings.from_env({}, data_dir=Path("/var/lib/kmq")).data_dir == "/var/lib/kmq"


@pytest.mark.parametrize("env, says", [
    ({"KMQ_MAX_DELIVERIES": "1000001"}, "KMQ_MAX_DELIVERIES=1000001 must be from 1 to 1,000,000"),
    ({"KMQ_MAX_DELIVERIES": "0"}, "KMQ_MAX_DELIVERIES=0 must be"),
    ({"KMQ_VISIBILITY_TIMEOUT_S": "0.0001"}, "KMQ_VISIBILITY_TIMEOUT_S=0.0001 is below 0.001 s: give at least"),
    ({"KMQ_MAX_PROCESSING_S": "0.0001"}, "KMQ_MAX_PROCESSING_S=0.0001 is below 0.001 s: .*or 0 for no keepalive"),
])
def test_defaults_have_the_bounds_a_queues_own_settings_have(env, says):
    with pytest.raises(ConfigError, match=says):
        Settings.from_env(env)
    assert Settings.from_env({"KMQ_MAX_PROCESSING_S": "0", "KMQ_MAX_DELIVERIES": "1000000"}).max_processing_s == 0


@pytest.mark.parametrize("env, address", [
    ({"KMQ_WEB_HOST": "0.0.0.0", "KMQ_WEB_PORT": "1"}, "http://127.0.0.1:1/"),  # loopback for a wildcard
    ({"KMQ_WEB_HOST": "127.0.0.2", "KMQ_WEB_PORT": "2"}, "http://127.0.0.2:2/"),
    ({"KMQ_TRACKER_URL": "http://127.0.0.1:3", "KMQ_WEB_PORT": "4"}, "http://127.0.0.1:3/"),
])
def test_stats_asks_the_documented_address(env, address):
    out = CliRunner().invoke(main, ["stats", "--timeout-s", "1"], env=env)
    assert out.exit_code == 1 and f"no tracker web view answered at {address}kmq/api/queues?" in out.output


@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1:1", "http://", "http://127.0.0.1:99999"])
def test_stats_refuses_a_url_that_is_not_a_web_address(url):
    out = run("stats", "--url", url, "--timeout-s", "1")
    assert out.exit_code == 2 and "--url / KMQ_TRACKER_URL" in out.output and ("e.g. http://" in out.output
                                                                            or "give http://" in out.output)
    out = CliRunner().invoke(main, ["stats", "--timeout-s", "1"], env={"KMQ_TRACKER_URL": url})
    assert out.exit_code == 2 and "KMQ_TRACKER_URL" in out.output


@pytest.mark.parametrize("seconds", [0.001, 10.0, 3e6, 1e9])
def test_any_connect_timeout_above_zero_makes_a_config_librdkafka_accepts(seconds):
    from confluent_kafka.admin import AdminClient

    from kmq.cli.connect import check_config
    from kmq.kafka.profiles import client_config
    AdminClient(check_config(client_config(Settings.from_env({}, bootstrap_servers="127.0.0.1:1")), seconds))


@pytest.mark.parametrize("seconds", ["0", "-1", "nan"])
def test_receive_visibility_timeout_must_be_seconds_above_zero(seconds):
    out = run("receive", *DOWN, "orders", "--visibility-timeout-s", seconds)
    assert out.exit_code == 2 and "--visibility-timeout-s" in out.output and "above 0" in out.output


def test_a_number_may_be_0_exactly_where_the_reference_says_what_0_does():
    import dataclasses
    for f in dataclasses.fields(Settings):
        if f.type not in ("int", "float", int, float):
            continue
        says = "(0:" in f.metadata["doc"] or "0: " in f.metadata["doc"]
        try:
            Settings.from_env({f.metadata["env"]: "0"})
            allowed = True
        except ConfigError as exc:
            allowed = False
            assert f.metadata["env"] in str(exc)
        assert allowed == says, f.metadata["env"]
        with pytest.raises(ConfigError, match=f.metadata["env"]):
            Settings.from_env({f.metadata["env"]: "-1"})


def test_kmq_devs_tracker_has_the_default_settings_a_client_given_its_env_line_has(monkeypatch):
    # The dev stack's tracker dead-lettered at 3 deliveries while `kmq queue show` (a client
    # with the printed env: KMQ_BOOTSTRAP_SERVERS, KMQ_PROFILE) said 5, the default.
    from dataclasses import fields

    from kmq.dev.devstack import dev_settings

    monkeypatch.setenv("KMQ_MAX_DELIVERIES", "7")  # the shell's KMQ_* do not reach the stack
    dev = dev_settings("127.0.0.1:9", "/tmp/d", 6066)
    client = Settings.from_env({"KMQ_BOOTSTRAP_SERVERS": "127.0.0.1:9", "KMQ_PROFILE": "embedded"})
    differ = {f.name for f in fields(Settings) if getattr(dev, f.name) != getattr(client, f.name)}
    assert differ == {"data_dir"} and dev.max_deliveries == 5


def test_a_zero_port_or_timeout_is_named_with_its_range_as_typed():
    # Audit: KMQ_WEB_PORT=0 said only "must be a positive number" (65536 named the range),
    # and KMQ_VISIBILITY_TIMEOUT_S=0 showed 0.0.
    with pytest.raises(ConfigError, match=r"KMQ_WEB_PORT=0 is not a TCP port \(1-65535\)"):
        Settings.from_env({"KMQ_WEB_PORT": "0"})
    with pytest.raises(ConfigError, match=r"KMQ_VISIBILITY_TIMEOUT_S=0 is below 0.001 s: give at least 0.001"):
        Settings.from_env({"KMQ_VISIBILITY_TIMEOUT_S": "0"})
    with pytest.raises(ConfigError, match=r"KMQ_DELIVERY_TIMEOUT_MS=0 is not above 0: give a positive number"):
        Settings.from_env({"KMQ_DELIVERY_TIMEOUT_MS": "0"})

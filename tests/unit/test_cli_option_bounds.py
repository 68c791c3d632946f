"""Option values the black-box audit found crashing or misleading, refused as usage errors
(exit status 2, before any broker contact) or turned into one ``error:`` line.

The broker address given is one nothing listens on: a check that ran after the broker check
would say "no Kafka broker answered" with exit status 1, not a usage error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kmq.cli import main

NOWHERE = ["--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "0.5"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("command", [["send", "orders", "x"], ["receive", "orders"],
                                     ["dlq", "list", "orders"], ["queue", "show", "orders"]])
@pytest.mark.parametrize("value", ["2147484", "1e308", "86401"])
def test_a_connect_timeout_above_a_day_is_a_usage_error(command, value):
    result = run(*command, "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", value)
    assert result.exit_code == 2, result.output
    assert "--connect-timeout-s" in result.output and "at most 86400" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("value", ["1e10", "86401"])
def test_a_stats_timeout_above_a_day_is_a_usage_error(value):
    result = run("stats", "--url", "http://127.0.0.1:1", "--timeout-s", value)
    assert result.exit_code == 2 and "--timeout-s" in result.output and "at most 86400" in result.output, \
        result.output


def test_a_wait_of_a_day_is_still_taken():
    from kmq.cli.option_checks import MAX_WAIT_S, positive_seconds
    assert positive_seconds(None, None, MAX_WAIT_S) == 86_400  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["1e-300", "0.001"])
def test_a_redrive_rate_below_one_message_in_100_s_is_a_usage_error(value):
    result = run("dlq", "redrive", "orders", "--rate", value, *NOWHERE)
    assert result.exit_code == 2 and "--rate" in result.output and "at least 0.01" in result.output, \
        result.output


@pytest.mark.parametrize("header, says", [("=v", "header name is empty"),
                                          ("kmq.id=x", "kmq's own"),
                                          ("name=\udcff", "not valid UTF-8"),
                                          ("\udcff=v", "not valid UTF-8")])
def test_every_header_problem_is_a_usage_error_naming_dash_h(header, says):
    result = run("send", "orders", "x", "-H", header, *NOWHERE)
    assert result.exit_code == 2, result.output
    assert "'-H'" in result.output and says in result.output and "no Kafka broker" not in result.output


def test_a_good_header_passes_the_check_and_reaches_the_broker_check():
    result = run("send", "orders", "x", "-H", "source=cli", *NOWHERE)
    assert result.exit_code == 1 and "no Kafka broker answered" in result.output, result.output


# Every command that takes --limit: 0 meant "all" to dlq list and "none" to dlq redrive
# (which moved nothing, exit status 0); stats refused it. Now refused by all three, alike.
LIMITED = [["dlq", "list", "orders", *NOWHERE], ["dlq", "redrive", "orders", *NOWHERE],
           ["stats", "--url", "http://127.0.0.1:1"]]


@pytest.mark.parametrize("command", LIMITED)
@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many"])
def test_a_limit_below_one_is_refused_the_same_way_by_every_command(command, value):
    result = run(*command, "--limit", value)
    assert result.exit_code == 2, result.output
    if value in ("0", "-1"):  # click's own message for a string that is not a number (stats)
        assert f"Invalid value for '--limit': '{value}': give a whole number, 1 or more" in result.output


@pytest.mark.parametrize("command", LIMITED[:2])
def test_the_dlq_commands_take_all_for_no_limit(command):
    from kmq.cli.option_checks import count_limit
    check = count_limit("every dead letter")
    assert check(None, None, "all") is None and check(None, None, "3") == 3  # type: ignore[arg-type]
    result = run(*command, "--limit", "all")
    assert result.exit_code == 1 and "no Kafka broker answered" in result.output  # past the option check


def test_a_bad_connection_option_is_named_as_the_option_not_an_sdk_keyword():
    # Audit: `--bootstrap-servers ""` said "(given as the keyword bootstrap_servers of
    # Settings / kmq.Client)": a CLI user gave no keyword.
    result = run("dlq", "list", "orders", "--bootstrap-servers", "", "--connect-timeout-s", "0.5")
    assert result.exit_code == 1 and "(given as --bootstrap-servers)" in result.output, result.output
    assert "kmq.Client" not in result.output


def test_a_bad_connection_variable_is_named_as_the_variable_not_an_option():
    # Audit: KMQ_BOOTSTRAP_SERVERS=127.0.0.1:0 with no option said "(given as
    # --bootstrap-servers)": click had read the variable and passed it on as the option.
    result = CliRunner().invoke(main, ["send", "orders", "x", "--connect-timeout-s", "0.5"],
                                env={"KMQ_BOOTSTRAP_SERVERS": "127.0.0.1:0"})
    assert result.exit_code == 1 and "KMQ_BOOTSTRAP_SERVERS='127.0.0.1:0'" in result.output, result.output
    assert "given as" not in result.output

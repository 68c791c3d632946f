"""``kmq queue set``'s options turned into configure_queue changes, without a broker."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from kmq.backoff import Backoff
from kmq.cli import main
from kmq.cli.queues import backoff_of, changes_of, described
from kmq.errors import ConfigError
from kmq.queue_config import QueueConfig
from kmq.settings import Settings


def test_numbers_and_default():
    got = changes_of({"visibility_timeout_s": "30", "max_deliveries": "default", "dedup_window_s": "2.5",
                      "max_processing_s": None})
    assert got == {"visibility_timeout_s": 30.0, "max_deliveries": None, "dedup_window_s": 2.5}


def test_choices_flags_and_spread():
    got = changes_of({"dispatch": "default", "ordering": "group", "dead_letter_head": "hold",
                      "dead_letter": False, "spread": 1})
    assert got == {"dispatch": None, "ordering": "group", "dead_letter_head": "hold",
                   "dead_letter": False, "spread": 1}


def test_a_bad_number_names_the_option_and_the_fix():
    with pytest.raises(ConfigError, match=r"--max-deliveries 'three': give a whole number or 'default'"):
        changes_of({"max_deliveries": "three"})
    with pytest.raises(ConfigError, match=r"--visibility-timeout-s '1s': give a number"):
        changes_of({"visibility_timeout_s": "1s"})


@pytest.mark.parametrize("given", [[], ["--json"]])
def test_queue_set_without_a_setting_is_a_usage_error_naming_them_before_the_broker_check(given):
    # Before: the broker check first (with the broker down, its error instead), then
    # "error: nothing to change", exit status 1, naming no option.
    out = CliRunner().invoke(main, ["queue", "set", "orders", *given, "--bootstrap-servers", "127.0.0.1:1",
                                    "--connect-timeout-s", "1"])
    assert out.exit_code == 2, out.output
    assert "Error: give at least one setting to change: --dispatch, --visibility-timeout-s" in out.output
    assert "--dead-letter/--no-dead-letter" in out.output and "no Kafka broker" not in out.output


def test_the_usage_error_names_every_setting_of_queue_set():
    from kmq.cli.queues import SET_OPTIONS, queue_set
    settings = {p.name for p in queue_set.params} - {"queue", "as_json", "bootstrap_servers", "token",
                                                       "connect_timeout_s"}
    assert settings == set(SET_OPTIONS)


def test_nothing_to_change_is_an_error():
    with pytest.raises(ConfigError, match="nothing to change"):
        changes_of({"dispatch": None, "dead_letter": None})


def test_backoff_specs():
    assert backoff_of("none") == Backoff.none() == backoff_of("default")
    assert backoff_of("fixed:5") == Backoff.fixed(5.0)
    assert backoff_of("exponential:1:60") == Backoff.exponential(1.0, 60.0)
    assert backoff_of("exponential:1:60:3:equal") == Backoff.exponential(1.0, 60.0, 3.0, "equal")
    for bad in ("fixed", "fixed:x", "exponential:1", "linear:1", "none:1", "exponential:1:60:2:sideways:9"):
        with pytest.raises(ConfigError, match="--backoff"):
            backoff_of(bad)
    with pytest.raises(ConfigError, match="jitter"):  # the policy's own check names the field
        backoff_of("exponential:1:60:2:sideways")


@pytest.mark.parametrize("spec, field", [("exponential:1:60:2:sideways", "jitter='sideways'"),
                                         ("exponential:60:1", "max_s=1.0"), ("fixed:-1", "base_s=-1.0")])
def test_a_backoff_the_policy_refuses_names_the_option_and_the_field(spec, field):
    with pytest.raises(ConfigError) as caught:
        backoff_of(spec)
    assert str(caught.value).startswith(f"--backoff {spec}: backoff ") and field in str(caught.value)


@given(st.text(max_size=40))
def test_any_backoff_text_is_a_policy_or_a_config_error(text):
    try:
        assert isinstance(backoff_of(text), Backoff)
    except ConfigError:
        pass


def test_described_fills_the_deployments_defaults_and_marks_them():
    s = Settings.from_env({}, visibility_timeout_s=7.0, max_deliveries=4, dispatch="shared")
    d = described("q", QueueConfig(max_deliveries=9), s)
    assert d["visibility_timeout_s"] == 7.0 and d["max_deliveries"] == 9 and d["dispatch"] == "shared"
    assert "visibility_timeout_s" in d["defaults"] and "max_deliveries" not in d["defaults"]


def test_a_bad_option_value_is_one_error_line_before_any_broker_is_asked():
    out = CliRunner().invoke(main, ["queue", "set", "q", "--dispatch", "sideways"])
    assert out.exit_code == 2 and "sideways" in out.output

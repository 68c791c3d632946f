"""A KMQ_* variable kmq does not read is ignored with one warning naming the variable meant."""

import logging

import pytest

import kmq.setting_names
from kmq.config_reference import OTHER_VARIABLES
from kmq.setting_names import OTHER_VARIABLE_NAMES
from kmq.settings import Settings


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch, caplog):
    """Each test starts as a process that has warned about nothing yet."""
    monkeypatch.setattr(kmq.setting_names, "_WARNED", set())
    caplog.set_level(logging.WARNING, logger="kmq.settings")


def warnings_about(caplog, name):
    return [r.getMessage() for r in caplog.records
            if r.name == "kmq.settings" and r.levelno == logging.WARNING and name in r.getMessage()]


def test_a_misspelt_variable_warns_naming_the_one_meant_and_is_not_applied(caplog):
    s = Settings.from_env({"KMQ_VISIBILITY_TIMEOUT": "5"})
    assert s.visibility_timeout_s == 30.0
    assert warnings_about(caplog, "KMQ_VISIBILITY_TIMEOUT") == [
        "KMQ_VISIBILITY_TIMEOUT is not a kmq variable and is ignored; did you mean "
        "KMQ_VISIBILITY_TIMEOUT_S? (kmq's variables: docs/configuration.md)"]


def test_settings_other_variables_and_test_prefixes_do_not_warn(caplog):
    s = Settings.from_env({"KMQ_TRACKER_URL": "http://h:1", "KMQ_TEST_X": "1",
                           "KMQ_PROFILE": "embedded", "PATH": "/bin"})
    assert s.profile == "embedded"
    assert [r for r in caplog.records if r.name == "kmq.settings"] == []


def test_a_name_unlike_any_variable_warns_without_a_guess(caplog):
    Settings.from_env({"KMQ_MY_APP_COLOUR": "blue"})
    [message] = warnings_about(caplog, "KMQ_MY_APP_COLOUR")
    assert "is ignored" in message and "docs/configuration.md" in message
    assert "did you mean" not in message


def test_a_misspelt_security_variable_warns_too(caplog):
    """KMQ_SSL_* are all settings, so the prefix is not exempt: a typo here drops a CA file."""
    Settings.from_env({"KMQ_SSL_CAFLE": "/ca.pem"})
    [message] = warnings_about(caplog, "KMQ_SSL_CAFLE")
    assert "did you mean KMQ_SSL_CAFILE?" in message


def test_the_warning_is_logged_once_per_process(caplog):
    Settings.from_env({"KMQ_MAX_DELIVERY": "3"})
    Settings.from_env({"KMQ_MAX_DELIVERY": "3"})
    assert len(warnings_about(caplog, "KMQ_MAX_DELIVERY")) == 1


def test_os_environ_is_checked_like_a_given_mapping(caplog, monkeypatch):
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVER", "h:1")
    Settings.from_env()
    [message] = warnings_about(caplog, "KMQ_BOOTSTRAP_SERVER")
    assert "did you mean KMQ_BOOTSTRAP_SERVERS?" in message


def test_settings_knows_exactly_the_documented_other_variables():
    """kmq.settings may not import kmq.config_reference, so kmq.setting_names keeps its own list of names."""
    assert set(OTHER_VARIABLE_NAMES) == {name for name, *_ in OTHER_VARIABLES}

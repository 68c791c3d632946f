"""Addresses and the session timeout: what crashed the tracker at start, or broke a group
later, is a ConfigError naming the variable and the fix (black-box audit)."""

from __future__ import annotations

import pytest

from kmq.errors import ConfigError
from kmq.settings import Settings


@pytest.mark.parametrize("env, value", [
    ("KMQ_WEB_HOST", "localhost:47750"), ("KMQ_WEB_HOST", "http://x"), ("KMQ_WEB_HOST", "u@h"),
    ("KMQ_WEB_ADVERTISED_HOST", "tracker-1:6066"), ("KMQ_WEB_ADVERTISED_HOST", "http://tracker-1")])
def test_a_web_host_with_a_port_or_a_url_is_refused(env, value):
    with pytest.raises(ConfigError, match=rf"^{env}='{value}' contains a port or a URL: .*KMQ_WEB_PORT"):
        Settings.from_env({env: value})


@pytest.mark.parametrize("value", ["127.0.0.1", "0.0.0.0", "::", "::1", "tracker-1.example.com"])
def test_host_names_and_addresses_are_taken(value):
    assert Settings.from_env({"KMQ_WEB_HOST": value}).web_host == value


@pytest.mark.parametrize("value", ["127.0.0.1:abc", "a:9092,b:", "[::1]:x", "h:0", "h:65536", "h:９０９２"])
def test_a_bootstrap_server_whose_port_is_no_port_is_refused(value):
    with pytest.raises(ConfigError, match=r"^KMQ_BOOTSTRAP_SERVERS=.*is not a TCP port \(1-65535\): give host:port"):
        Settings.from_env({"KMQ_BOOTSTRAP_SERVERS": value})


@pytest.mark.parametrize("value", ["127.0.0.1:9092", "a:1, b:65535", "[::1]:9092", "[::1]", "h", "SSL://k:9093"])
def test_bootstrap_servers_kafka_clients_take_are_taken(value):
    assert Settings.from_env({"KMQ_BOOTSTRAP_SERVERS": value}).bootstrap_servers == value


def test_a_session_timeout_below_a_second_is_refused_and_0_is_the_profiles():
    with pytest.raises(ConfigError, match=r"^KMQ_SESSION_TIMEOUT_MS=999 is below 1,000 ms: give 0"):
        Settings.from_env({"KMQ_SESSION_TIMEOUT_MS": "999"})
    assert Settings.from_env({"KMQ_SESSION_TIMEOUT_MS": "1000"}).session_timeout_ms == 1000
    assert Settings.from_env({"KMQ_SESSION_TIMEOUT_MS": "0"}).effective_session_timeout_ms > 0

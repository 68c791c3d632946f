"""Settings from KMQ_* variables: parsed, validated, errors naming the variable."""

import pytest

from kmq.errors import ConfigError
from kmq.settings import Settings, reference_markdown


def test_defaults_and_env_values():
    s = Settings.from_env({"KMQ_BOOTSTRAP_SERVERS": "h:1", "KMQ_WEB_PORT": "7000",
                           "KMQ_PROFILE": "embedded", "KMQ_DATA_DIR": "/d"})
    assert (s.bootstrap_servers, s.web_port, s.profile, s.data_dir) == ("h:1", 7000, "embedded", "/d")
    assert s.effective_replication_factor == 1 and s.effective_session_timeout_ms == 6000
    assert s.topics.queue == "kmq.queue" and s.topics.markers == "kmq.markers"


def test_production_profile_is_durable_by_default():
    s = Settings.from_env({})
    assert s.effective_replication_factor == 3 and s.effective_session_timeout_ms == 10000


@pytest.mark.parametrize("env, names", [
    ({"KMQ_WEB_PORT": "web"}, "KMQ_WEB_PORT"),
    ({"KMQ_PROFILE": "staging"}, "KMQ_PROFILE"),
    ({"KMQ_QUEUE_PARTITIONS": "0"}, "KMQ_QUEUE_PARTITIONS"),
    ({"KMQ_MAX_DELIVERIES": "-1"}, "KMQ_MAX_DELIVERIES"),
    ({"KMQ_VISIBILITY_TIMEOUT_S": "soon"}, "KMQ_VISIBILITY_TIMEOUT_S"),
])
def test_bad_values_name_the_variable(env, names):
    with pytest.raises(ConfigError, match=names):
        Settings.from_env(env)


def test_the_reference_lists_every_variable():
    ref = reference_markdown()
    for name in ("KMQ_BOOTSTRAP_SERVERS", "KMQ_DATA_DIR", "KMQ_WEB_PORT", "KMQ_PROFILE"):
        assert f"`{name}`" in ref


def test_the_committed_configuration_reference_is_current():
    from pathlib import Path
    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert doc.read_text() == reference_markdown(), "run: kmq config-reference --out docs/configuration.md"


def test_repr_hides_every_secret_and_shows_the_rest():
    s = Settings(admin_token="a" * 20, token="tenant-secret-token", auth="on")
    object.__setattr__(s, "sasl_password", "pw-123")  # (frozen; set past validation)
    object.__setattr__(s, "ssl_key_password", "key-456")
    text = repr(s)
    for secret in ("a" * 20, "tenant-secret-token", "pw-123", "key-456"):
        assert secret not in text
    assert "admin_token=***" in text and "auth='on'" in text and "sasl_username=''" in text
    assert "token=''" in repr(Settings())  # unset: nothing to hide

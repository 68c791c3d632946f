"""Settings from KMQ_* variables: parsed, validated, errors naming the variable."""

import dataclasses
import re
from pathlib import Path

import pytest

from kmq.errors import ConfigError
from kmq.config_reference import OTHER_VARIABLES, reference_markdown
from kmq.settings import Settings


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


# A KMQ_* variable read outside Settings: os.environ[...] / .get / getenv, click's envvar=,
# or a shell's $KMQ_X / ${KMQ_X...}.
READ_RE = re.compile(r"""(?:environ(?:\.get|\.setdefault|\.pop)?\s*[\(\[]\s*|getenv\(\s*|envvar=)"""
                     r"""["'](KMQ_[A-Z0-9_]+)["']|\$\{?(KMQ_[A-Z0-9_]+)""")
ROOT = Path(__file__).resolve().parents[2]


def variables_read() -> dict[str, str]:
    """Every KMQ_* variable the shipped code and scripts read -> the first file reading it."""
    files = [p for folder in ("kmq", "agents", "app", "web", "tables") for p in (ROOT / folder).rglob("*.py")]
    files += [p for p in (ROOT / "scripts").iterdir() if p.is_file()] + [ROOT / "Dockerfile"]
    found: dict[str, str] = {}
    for path in sorted(files):
        for m in READ_RE.finditer(path.read_text()):
            found.setdefault(m.group(1) or m.group(2), str(path.relative_to(ROOT)))
    return found


def test_the_reference_lists_every_variable():
    """KMQ_DISPATCH_TRACE, KMQ_TRACKER_URL and KMQ_SERVICE_ROOT were read but not listed."""
    ref = reference_markdown()
    for f in dataclasses.fields(Settings):
        assert f"| `{f.metadata['env']}` |" in ref
    read = variables_read()
    for name in ("KMQ_DISPATCH_TRACE", "KMQ_TRACKER_URL", "KMQ_SERVICE_ROOT", "KMQ_TEST_WORKERS",
                 "KMQ_BOOTSTRAP_SERVERS", "KMQ_WEB_HOST"):
        assert name in read, f"the scan misses {name}"
    for name, where in read.items():
        assert f"| `{name}` |" in ref, f"{where} reads {name}: add it to OTHER_VARIABLES (kmq/config_reference.py)"


def test_other_variables_are_read_somewhere_and_are_not_settings():
    settings_names = {f.metadata["env"] for f in dataclasses.fields(Settings)}
    read = variables_read()
    for name, *_ in OTHER_VARIABLES:
        assert name in read, f"{name} is listed in OTHER_VARIABLES but nothing reads it"
        assert name not in settings_names, f"{name} is a setting: list it once, in Settings"


def test_the_test_workers_default_is_the_one_scripts_test_uses():
    """The reference said 4 while scripts/test ran six."""
    (used,) = re.findall(r"KMQ_TEST_WORKERS:-(\d+)", (ROOT / "scripts" / "test").read_text())
    (listed,) = [default for name, _, default, _ in OTHER_VARIABLES if name == "KMQ_TEST_WORKERS"]
    assert listed == f"`{used}`"


def test_the_committed_configuration_reference_is_current():
    doc = ROOT / "docs" / "configuration.md"
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


def test_queue_retention_must_outlast_the_longest_processing_with_the_fix():
    """Given 3 days of queue retention and 5 days of KMQ_MAX_PROCESSING_S, a held message
    whose consumer dies late is read back after its payload expired: refused at start."""
    day_ms = 86_400_000
    env = {"KMQ_QUEUE_RETENTION_MS": str(3 * day_ms), "KMQ_MAX_DELAY_S": "86400",
           "KMQ_MAX_PROCESSING_S": str(5 * 86_400)}
    with pytest.raises(ConfigError, match=r"KMQ_QUEUE_RETENTION_MS=259200000 \(3.0 days\) does not exceed "
                                          r"KMQ_MAX_PROCESSING_S=432000 \+ KMQ_VISIBILITY_TIMEOUT_S=30 \(5.0 days\): .*payload-expired.*"
                                          r"raise KMQ_QUEUE_RETENTION_MS .* or lower KMQ_MAX_PROCESSING_S$"):
        Settings.from_env(env)
    assert Settings.from_env({**env, "KMQ_MAX_PROCESSING_S": str(2 * 86_400)}).max_processing_s == 2 * 86_400
    # A held message comes back a visibility timeout after its last keepalive.
    with pytest.raises(ConfigError, match=r"KMQ_MAX_PROCESSING_S=258000"):
        Settings.from_env({**env, "KMQ_MAX_PROCESSING_S": "258000", "KMQ_VISIBILITY_TIMEOUT_S": "1200"})
    # 0 (no keepalive in user code) holds nothing past the visibility timeout.
    assert Settings.from_env({**env, "KMQ_MAX_PROCESSING_S": "0"}).max_processing_s == 0


def test_the_retention_error_names_the_sum_it_compared_in_seconds_below_a_day():
    # 301 s exceeds KMQ_MAX_PROCESSING_S=300 but not 300 + the 30 s visibility timeout; the
    # message said "KMQ_MAX_PROCESSING_S=300 (0.0 days)".
    with pytest.raises(ConfigError, match=r"^KMQ_QUEUE_RETENTION_MS=301000 \(301 s\) does not exceed "
                                          r"KMQ_MAX_PROCESSING_S=300 \+ KMQ_VISIBILITY_TIMEOUT_S=30 \(330 s\): "):
        Settings(max_delay_s=100, max_processing_s=300, visibility_timeout_s=30, queue_retention_ms=301_000)


@pytest.mark.parametrize("name, value", [("KMQ_MAX_DELAY_S", "31536001"), ("KMQ_VISIBILITY_TIMEOUT_S", "43201"),
                                         ("KMQ_MAX_PROCESSING_S", "604801")])
def test_a_value_above_its_limit_is_quoted_as_given_not_in_exponent_form(name, value):
    # KMQ_MAX_DELAY_S=31536001 was quoted back as 3.1536e+07.
    with pytest.raises(ConfigError, match=rf"{name}={value} is above"):
        Settings.from_env({name: value})


@pytest.mark.parametrize("keyword, value", [("visibility_timeout_s", 0), ("max_deliveries", 0), ("auth", "ON"),
                                            ("max_delay_s", 10**9)])
def test_a_bad_keyword_value_names_the_keyword_and_its_variable(keyword, value):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({}, **{keyword: value})
    assert f"KMQ_{keyword.upper()}" in str(err.value) and f"keyword {keyword} " in str(err.value)
    with pytest.raises(ConfigError, match=f"keyword {keyword} "):
        Settings.from_env({}).replace(**{keyword: value})
    with pytest.raises(ConfigError) as from_env:  # set as a variable, it names only the variable
        Settings.from_env({f"KMQ_{keyword.upper()}": str(value)})
    assert "keyword" not in str(from_env.value)


@pytest.mark.parametrize("raw", ["6_066", "６０６６", "60.66"])
def test_a_whole_number_is_ascii_digits(raw):
    with pytest.raises(ConfigError, match="KMQ_WEB_PORT=.* is not a whole number: give digits only"):
        Settings.from_env({"KMQ_WEB_PORT": raw})
    assert Settings.from_env({"KMQ_WEB_PORT": " 6066 "}).web_port == 6066  # spaces around: ignored
    with pytest.raises(ConfigError, match="KMQ_VISIBILITY_TIMEOUT_S='1_0' is not a number"):
        Settings.from_env({"KMQ_VISIBILITY_TIMEOUT_S": "1_0"})


@pytest.mark.parametrize("env", ["KMQ_MAX_DELIVERIES", "KMQ_VISIBILITY_TIMEOUT_S", "KMQ_PROFILE"])
def test_an_empty_variable_is_unset_but_one_of_only_spaces_is_refused_naming_it(env):
    # docs/configuration.md says both: "" means the default; "  " is a value, and not a valid one.
    assert Settings.from_env({env: ""}) == Settings.from_env({})
    with pytest.raises(ConfigError, match=rf"^{env}='  ' "):
        Settings.from_env({env: "  "})

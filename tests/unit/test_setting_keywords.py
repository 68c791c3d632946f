"""A misspelt setting keyword names the setting meant (not a TypeError from the dataclass)."""

import pytest

import kmq
from kmq.errors import ConfigError
from kmq.settings import Settings


def test_a_misspelt_client_keyword_names_the_setting_meant():
    with pytest.raises(ConfigError, match=r"no setting 'bootstrap_server'; did you mean 'bootstrap_servers'"):
        kmq.Client(bootstrap_server="127.0.0.1:9092")


def test_a_misspelt_keyword_beside_given_settings_is_refused_too():
    with pytest.raises(ConfigError, match=r"'compresion'.*'compression'"):
        kmq.Client(settings=Settings.from_env({}), compresion="zstd")
    with pytest.raises(ConfigError, match=r"no setting 'zzz_q'; a setting's keyword is its KMQ_\*"):
        Settings.from_env({}).replace(zzz_q=1)


def test_every_setting_is_its_variable_in_lower_case():
    s = kmq.Client(compression="zstd", max_deliveries=7).settings
    assert (s.compression, s.max_deliveries) == ("zstd", 7)

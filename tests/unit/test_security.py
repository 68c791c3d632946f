"""SASL/SSL settings reach librdkafka and Faust alike; impossible combinations fail with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer as RdProducer

from kmq.kafka import profiles
from kmq.kafka import security
from kmq.errors import ConfigError
from kmq.settings import Settings

TLS = Path(__file__).parent / "fixtures" / "tls"
CA, CERT, KEY = str(TLS / "ca.pem"), str(TLS / "client.pem"), str(TLS / "client.key")
ENCRYPTED_KEY, KEY_PASSWORD = str(TLS / "client-encrypted.key"), "kmq-test-password"

SASL_SSL = {"KMQ_SECURITY_PROTOCOL": "SASL_SSL", "KMQ_SASL_MECHANISM": "SCRAM-SHA-512",
            "KMQ_SASL_USERNAME": "kmq", "KMQ_SASL_PASSWORD": "secret", "KMQ_SSL_CAFILE": CA}


def settings(**env: str) -> Settings:
    return Settings.from_env({"KMQ_BOOTSTRAP_SERVERS": "127.0.0.1:1", **env})


def aiokafka_auth(s: Settings) -> dict:
    """What Faust hands aiokafka for these settings (Faust's own translation)."""
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    from app.settings import faust_options
    return dict(credentials_to_aiokafka_auth(faust_options(s).get("broker_credentials")))


@pytest.mark.parametrize("env, words", [
    ({"KMQ_SECURITY_PROTOCOL": "TLS"}, r"KMQ_SECURITY_PROTOCOL='TLS' is not a protocol: use one of"),
    ({"KMQ_SASL_MECHANISM": "PLAIN", "KMQ_SASL_USERNAME": "u", "KMQ_SASL_PASSWORD": "p"},
     r"KMQ_SASL_MECHANISM is set but KMQ_SECURITY_PROTOCOL=PLAINTEXT does not use SASL: "
     r"set KMQ_SECURITY_PROTOCOL=SASL_SSL"),
    ({"KMQ_SECURITY_PROTOCOL": "SSL", "KMQ_SASL_USERNAME": "u"},
     r"KMQ_SASL_USERNAME is set but KMQ_SECURITY_PROTOCOL=SSL does not use SASL"),
    ({"KMQ_SECURITY_PROTOCOL": "SASL_SSL"}, r"SASL_SSL needs KMQ_SASL_MECHANISM: set one of PLAIN"),
    ({"KMQ_SECURITY_PROTOCOL": "SASL_SSL", "KMQ_SASL_MECHANISM": "GSSAPI"},
     r"KMQ_SASL_MECHANISM='GSSAPI' is not supported: use one of PLAIN, SCRAM-SHA-256"),
    ({"KMQ_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KMQ_SASL_MECHANISM": "PLAIN",
      "KMQ_SASL_USERNAME": "u"}, r"needs KMQ_SASL_PASSWORD: set the SASL user name and password"),
    ({"KMQ_SSL_CAFILE": CA},
     r"KMQ_SSL_CAFILE is set but KMQ_SECURITY_PROTOCOL=PLAINTEXT does not use TLS: "
     r"set KMQ_SECURITY_PROTOCOL=SSL"),
    ({"KMQ_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KMQ_SASL_MECHANISM": "PLAIN",
      "KMQ_SASL_USERNAME": "u", "KMQ_SASL_PASSWORD": "p", "KMQ_SSL_CAFILE": CA},
     r"KMQ_SSL_CAFILE is set but KMQ_SECURITY_PROTOCOL=SASL_PLAINTEXT does not use TLS"),
    ({"KMQ_SECURITY_PROTOCOL": "SSL", "KMQ_SSL_CERTFILE": CERT},
     r"KMQ_SSL_CERTFILE is set without KMQ_SSL_KEYFILE: .*set both or neither"),
    ({"KMQ_SECURITY_PROTOCOL": "SSL", "KMQ_SSL_KEYFILE": KEY},
     r"KMQ_SSL_KEYFILE is set without KMQ_SSL_CERTFILE"),
    ({"KMQ_SECURITY_PROTOCOL": "SSL", "KMQ_SSL_KEY_PASSWORD": "x"},
     r"KMQ_SSL_KEY_PASSWORD is set without KMQ_SSL_KEYFILE"),
])
def test_impossible_combinations_name_the_variable_and_the_fix(env, words):
    with pytest.raises(ConfigError, match=words):
        settings(**env)


def test_a_missing_certificate_file_is_named_when_a_client_is_built():
    s = settings(KMQ_SECURITY_PROTOCOL="SSL", KMQ_SSL_CAFILE="/nonexistent/ca.pem")
    with pytest.raises(ConfigError, match="KMQ_SSL_CAFILE=/nonexistent/ca.pem is not a file"):
        profiles.client_config(s)
    with pytest.raises(ConfigError, match="KMQ_SSL_CAFILE"):
        security.ssl_context(s)


def test_sasl_ssl_reaches_librdkafka():
    s = settings(**SASL_SSL)
    expected = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "kmq", "sasl.password": "secret", "ssl.ca.location": CA}
    for conf in (profiles.client_config(s), profiles.producer_config(s),
                 profiles.group_consumer_config(s, "g"), s.client_config()):
        assert conf.items() >= expected.items()
    RdProducer({**profiles.producer_config(s), "log_level": 0}).flush(0)  # librdkafka accepts it


def test_sasl_ssl_reaches_faust_with_tls():
    auth = aiokafka_auth(settings(**SASL_SSL))
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("kmq", "secret")
    assert auth["ssl_context"].verify_mode.name == "CERT_REQUIRED"
    assert auth["ssl_context"].check_hostname


def test_sasl_plaintext_stays_plaintext_in_faust():
    s = settings(KMQ_SECURITY_PROTOCOL="sasl_plaintext", KMQ_SASL_MECHANISM="plain",
                 KMQ_SASL_USERNAME="u", KMQ_SASL_PASSWORD="p")
    auth = aiokafka_auth(s)
    assert auth["security_protocol"] == "SASL_PLAINTEXT" and auth["ssl_context"] is None
    assert auth["sasl_mechanism"] == "PLAIN"
    assert profiles.client_config(s)["security.protocol"] == "SASL_PLAINTEXT"
    assert profiles.client_config(s)["sasl.mechanism"] == "PLAIN"


def test_mutual_tls_reaches_librdkafka_and_faust():
    s = settings(KMQ_SECURITY_PROTOCOL="SSL", KMQ_SSL_CAFILE=CA, KMQ_SSL_CERTFILE=CERT,
                 KMQ_SSL_KEYFILE=KEY)
    conf = profiles.producer_config(s)
    assert conf.items() >= {"security.protocol": "SSL", "ssl.ca.location": CA,
                            "ssl.certificate.location": CERT, "ssl.key.location": KEY}.items()
    # librdkafka loads the certificate and key at construction and checks they match.
    RdProducer({**conf, "log_level": 0}).flush(0)
    auth = aiokafka_auth(s)
    assert auth["security_protocol"] == "SSL" and auth["ssl_context"] is not None
    assert "sasl_mechanism" not in auth


def test_an_encrypted_client_key_needs_its_password():
    env = dict(KMQ_SECURITY_PROTOCOL="SSL", KMQ_SSL_CAFILE=CA, KMQ_SSL_CERTFILE=CERT,
               KMQ_SSL_KEYFILE=ENCRYPTED_KEY)
    s = settings(**env, KMQ_SSL_KEY_PASSWORD=KEY_PASSWORD)
    assert security.ssl_context(s) is not None
    assert profiles.client_config(s)["ssl.key.password"] == KEY_PASSWORD
    RdProducer({**profiles.producer_config(s), "log_level": 0}).flush(0)
    with pytest.raises(ConfigError, match="KMQ_SSL_KEY_PASSWORD"):
        security.ssl_context(settings(**env, KMQ_SSL_KEY_PASSWORD="wrong"))


def test_plaintext_means_no_credentials_anywhere():
    for s in (settings(), settings(KMQ_SECURITY_PROTOCOL="PLAINTEXT")):
        assert aiokafka_auth(s) == {"security_protocol": "PLAINTEXT"}
        assert not {k for k in profiles.client_config(s) if k.startswith(("sasl.", "ssl."))}


@pytest.fixture
def not_pem(tmp_path):
    path = tmp_path / "garbage.pem"
    path.write_text("this is not a certificate\n")
    return str(path)


def test_a_ca_file_that_is_not_pem_is_named_not_a_librdkafka_error(not_pem):
    s = settings(KMQ_SECURITY_PROTOCOL="SSL", KMQ_SSL_CAFILE=not_pem)
    words = f"KMQ_SSL_CAFILE={not_pem} is not a PEM certificate file .*BEGIN CERTIFICATE"
    with pytest.raises(ConfigError, match=words):
        profiles.client_config(s)
    with pytest.raises(ConfigError, match=words):
        security.ssl_context(s)  # the tracker's (Faust's) client
    import kmq
    with pytest.raises(ConfigError, match=words):  # the SDK: its first producer
        kmq.Client(settings=s).send("emails", b"x")


def test_a_client_certificate_or_key_that_is_not_pem_is_named(not_pem):
    tls = dict(KMQ_SECURITY_PROTOCOL="SSL", KMQ_SSL_CAFILE=CA)
    with pytest.raises(ConfigError, match=f"KMQ_SSL_CERTFILE={not_pem} is not a PEM certificate"):
        profiles.client_config(settings(**tls, KMQ_SSL_CERTFILE=not_pem, KMQ_SSL_KEYFILE=KEY))
    with pytest.raises(ConfigError, match=f"KMQ_SSL_KEYFILE={not_pem} is not the PEM private key"):
        profiles.client_config(settings(**tls, KMQ_SSL_CERTFILE=CERT, KMQ_SSL_KEYFILE=not_pem))
    # An encrypted key without its password is an error, not a prompt on the terminal.
    with pytest.raises(ConfigError, match="KMQ_SSL_KEY_PASSWORD if the key is encrypted"):
        profiles.client_config(settings(**tls, KMQ_SSL_CERTFILE=CERT, KMQ_SSL_KEYFILE=ENCRYPTED_KEY))


def test_a_cli_command_with_a_ca_file_that_is_not_pem_is_one_error_line(not_pem):
    env = {**os.environ, "KMQ_SECURITY_PROTOCOL": "SSL", "KMQ_SSL_CAFILE": not_pem,
           "KMQ_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    out = subprocess.run([sys.executable, "-m", "kmq.cli", "send", "emails", "hello"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, out
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: KMQ_SSL_CAFILE={not_pem} is not a PEM certificate file"), line

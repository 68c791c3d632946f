"""SASL/SSL passthrough: the ``KMQ_SECURITY_*``, ``KMQ_SASL_*`` and ``KMQ_SSL_*`` settings.

One set of variables secures every Kafka client kmq runs:

- librdkafka (confluent-kafka): the SDK's producer and consumers, the admin
  client, and the tracker's own republisher and payload reader
  (:func:`librdkafka_config`);
- aiokafka under Faust: the tracker's consumer, producer and changelogs
  (:func:`protocol`, :func:`uses_sasl` and :func:`ssl_context`, turned
  into Faust credentials by ``app/settings.py``).

:func:`check` runs when a :class:`~kmq.settings.Settings` is built, so a
combination that one client would ignore and another would honour (a SASL
mechanism without a SASL protocol, a CA file without TLS) fails at start,
naming the variable and the fix, instead of connecting differently.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any

from kmq.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from kmq.settings import Settings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# KMQ_* setting -> librdkafka property, in the order they are documented.
LIBRDKAFKA_NAMES = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_key_password": "ssl.key.password",
}

# KMQ_* setting -> where aiokafka (Faust's client) gets it; documented with the reference.
AIOKAFKA_NAMES = {
    "security_protocol": "security_protocol (faust.SSLCredentials / SASLCredentials)",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "ssl_cafile": "ssl_context: load_verify_locations(cafile)",
    "ssl_certfile": "ssl_context: load_cert_chain(certfile, ...)",
    "ssl_keyfile": "ssl_context: load_cert_chain(..., keyfile, ...)",
    "ssl_key_password": "ssl_context: load_cert_chain(..., password)",
}

_TLS_FILES = (("ssl_cafile", "KMQ_SSL_CAFILE"), ("ssl_certfile", "KMQ_SSL_CERTFILE"),
              ("ssl_keyfile", "KMQ_SSL_KEYFILE"))


def protocol(s: "Settings") -> str:
    """The security protocol in upper case; ``PLAINTEXT`` when unset."""
    return (s.security_protocol or "PLAINTEXT").strip().upper()


def uses_sasl(s: "Settings") -> bool:
    """True for SASL_PLAINTEXT and SASL_SSL."""
    return protocol(s).startswith("SASL_")


def uses_tls(s: "Settings") -> bool:
    """True for SSL and SASL_SSL."""
    return protocol(s) in ("SSL", "SASL_SSL")


def check(s: "Settings") -> None:
    """Raise :class:`ConfigError` for a combination of security settings that cannot work."""
    proto = protocol(s)
    if proto not in PROTOCOLS:
        raise ConfigError(
            f"KMQ_SECURITY_PROTOCOL={s.security_protocol!r} is not a protocol: "
            f"use one of {', '.join(PROTOCOLS)}")
    mechanism = s.sasl_mechanism.strip().upper()
    if uses_sasl(s):
        if not mechanism:
            raise ConfigError(
                f"KMQ_SECURITY_PROTOCOL={proto} needs KMQ_SASL_MECHANISM: "
                f"set one of {', '.join(MECHANISMS)}")
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"KMQ_SASL_MECHANISM={s.sasl_mechanism!r} is not supported: "
                f"use one of {', '.join(MECHANISMS)}")
        missing = [env for env, value in (("KMQ_SASL_USERNAME", s.sasl_username),
                                          ("KMQ_SASL_PASSWORD", s.sasl_password)) if not value]
        if missing:
            raise ConfigError(
                f"KMQ_SASL_MECHANISM={mechanism} needs {' and '.join(missing)}: "
                "set the SASL user name and password")
    else:
        for env, value in (("KMQ_SASL_MECHANISM", s.sasl_mechanism),
                           ("KMQ_SASL_USERNAME", s.sasl_username),
                           ("KMQ_SASL_PASSWORD", s.sasl_password)):
            if value:
                raise ConfigError(
                    f"{env} is set but KMQ_SECURITY_PROTOCOL={proto} does not use SASL: "
                    f"set KMQ_SECURITY_PROTOCOL=SASL_SSL (or SASL_PLAINTEXT), or unset {env}")
    if not uses_tls(s):
        for env, value in (("KMQ_SSL_CAFILE", s.ssl_cafile), ("KMQ_SSL_CERTFILE", s.ssl_certfile),
                           ("KMQ_SSL_KEYFILE", s.ssl_keyfile),
                           ("KMQ_SSL_KEY_PASSWORD", s.ssl_key_password)):
            if value:
                raise ConfigError(
                    f"{env} is set but KMQ_SECURITY_PROTOCOL={proto} does not use TLS: "
                    f"set KMQ_SECURITY_PROTOCOL=SSL (or SASL_SSL), or unset {env}")
    if bool(s.ssl_certfile) != bool(s.ssl_keyfile):
        have, lack = (("KMQ_SSL_CERTFILE", "KMQ_SSL_KEYFILE") if s.ssl_certfile
                      else ("KMQ_SSL_KEYFILE", "KMQ_SSL_CERTFILE"))
        raise ConfigError(
            f"{have} is set without {lack}: a client certificate (mutual TLS) needs both "
            "the certificate and its private key; set both or neither")
    if s.ssl_key_password and not s.ssl_keyfile:
        raise ConfigError(
            "KMQ_SSL_KEY_PASSWORD is set without KMQ_SSL_KEYFILE: set the key file or unset "
            "the password")


def check_files(s: "Settings") -> None:
    """Raise :class:`ConfigError` if a configured certificate or key file is missing or unreadable.

    The files are loaded here with Python's ``ssl`` (the same OpenSSL parser librdkafka
    uses), so a file that is not PEM is named with its variable instead of surfacing as
    a librdkafka ``_INVALID_ARG`` traceback from the first client built.
    """
    for name, env in _TLS_FILES:
        path = getattr(s, name)
        if path and not os.path.isfile(path):
            raise ConfigError(
                f"{env}={path} is not a file: mount the PEM file there or fix the path")
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for name, env in _TLS_FILES[:2]:  # the CA and the client certificate
        path = getattr(s, name)
        if not path:
            continue
        try:
            probe.load_verify_locations(cafile=path)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"{env}={path} is not a PEM certificate file ({_reason(exc)}): give a file "
                "with one or more -----BEGIN CERTIFICATE----- blocks (convert DER with "
                "`openssl x509 -inform der -in FILE -out FILE.pem`)") from exc
    if s.ssl_certfile and s.ssl_keyfile:
        try:
            # "" and not None: None makes OpenSSL prompt on the terminal for an encrypted key.
            probe.load_cert_chain(s.ssl_certfile, s.ssl_keyfile, password=s.ssl_key_password or "")
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"KMQ_SSL_KEYFILE={s.ssl_keyfile} is not the PEM private key of "
                f"KMQ_SSL_CERTFILE={s.ssl_certfile} ({_reason(exc)}): give the key matching the "
                "certificate, and KMQ_SSL_KEY_PASSWORD if the key is encrypted") from exc


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)


def librdkafka_config(s: "Settings") -> dict[str, Any]:
    """The security properties for a librdkafka client (empty for PLAINTEXT)."""
    conf: dict[str, Any] = {}
    if s.security_protocol:
        conf["security.protocol"] = protocol(s)
    if uses_sasl(s):
        conf["sasl.mechanism"] = s.sasl_mechanism.strip().upper()
        conf["sasl.username"] = s.sasl_username
        conf["sasl.password"] = s.sasl_password
    if uses_tls(s):
        check_files(s)
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_key_password"):
            if getattr(s, name):
                conf[LIBRDKAFKA_NAMES[name]] = getattr(s, name)
    return conf


def ssl_context(s: "Settings") -> ssl.SSLContext | None:
    """The TLS context for aiokafka (None unless the protocol uses TLS).

    Verifies the broker's certificate and host name (as librdkafka does by
    default) against ``KMQ_SSL_CAFILE`` or the system's CAs, and presents
    the client certificate when ``KMQ_SSL_CERTFILE``/``KMQ_SSL_KEYFILE`` are set.
    """
    if not uses_tls(s):
        return None
    check_files(s)
    try:
        context = ssl.create_default_context(cafile=s.ssl_cafile or None)
        if s.ssl_certfile:
            context.load_cert_chain(s.ssl_certfile, s.ssl_keyfile,
                                    password=s.ssl_key_password or None)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"TLS files KMQ_SSL_CAFILE={s.ssl_cafile or '(system)'} "
            f"KMQ_SSL_CERTFILE={s.ssl_certfile or '(none)'} KMQ_SSL_KEYFILE={s.ssl_keyfile or '(none)'} "
            f"could not be loaded ({exc}): give PEM files, the key matching the certificate "
            "(and KMQ_SSL_KEY_PASSWORD if the key is encrypted)") from exc
    return context

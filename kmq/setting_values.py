"""A setting's value from its ``KMQ_*`` variable's text, and the type check of a value given as
a keyword (``kmq.Client(web_port="6066")``): both name the variable or keyword and the fix."""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import socket
from typing import Any

from kmq.errors import ConfigError

# Settings shown as "***" (Settings.__repr__, and the errors here): a secret is never printed.
SECRET_FIELDS = ("sasl_password", "ssl_key_password", "admin_token", "token")


def _kind(f: dataclasses.Field) -> type:
    return f.type if isinstance(f.type, type) else {"int": int, "float": float, "str": str}[f.type]


def parse_value(f: dataclasses.Field, env_name: str, raw: str) -> Any:
    kind = _kind(f)
    if kind is str:
        return raw
    try:
        # Python's int() and float() also read "6_066" and other scripts' digits: not ours.
        if "_" in raw or not raw.isascii():
            raise ValueError(raw)
        value = kind(raw)  # spaces around the number are ignored
    except ValueError as exc:
        raise ConfigError(f"{env_name}={raw!r} is not a "
                          + ("whole number: give digits only" if kind is int else "number: give one, e.g. 30")
                          ) from exc
    if kind is float and not math.isfinite(value):  # float() reads nan and inf, which no check refuses
        raise ConfigError(f"{env_name}={raw!r} is not a finite number: give one, e.g. 30")
    return value


def check_type(f: dataclasses.Field, value: Any) -> None:
    """A keyword (``kmq.Client(web_port="6066")``) of the wrong type names the keyword; it was
    a TypeError from a comparison, or silently kept as text."""
    shown = "***" if f.name in SECRET_FIELDS else repr(value)  # error messages reach logs
    kind, name = _kind(f), f"{f.name}={shown} ({f.metadata['env']})"
    if kind is str and not isinstance(value, str):
        raise ConfigError(f"{name} is not text: give a string")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{name} is not a whole number: give an int")
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} is not a number: give a float or an int")
        if not math.isfinite(value):
            raise ConfigError(f"{name} is not a finite number: give one")


def is_wildcard(host: str) -> bool:
    """Whether binding ``host`` (``KMQ_WEB_HOST``) listens on every interface: empty, ``0.0.0.0``
    and ``::`` however written (``::0``, ``[::]``, ``::%eth0``, ``0``, ``0.0.0.00``, ``0x0``),
    and the IPv4-mapped ``::ffff:0.0.0.0`` (``::ffff:0:0``), which a dual-stack socket binds
    as every IPv4 interface."""
    h = host.strip()
    if not h:
        return True
    h = h[1:-1] if h.startswith("[") and h.endswith("]") else h
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        pass
    else:
        mapped = getattr(ip, "ipv4_mapped", None)  # IPv6 only
        return ip.is_unspecified or (mapped is not None and mapped.is_unspecified)
    try:  # the resolver's IPv4 forms: "0", "0.0.0.00", "0x0"
        return socket.inet_aton(h) == bytes(4)
    except OSError:
        return False


def web_url(host: str, port: int) -> str:
    """The URL of a tracker's web view bound to ``host``: loopback for a wildcard, an IPv6
    address in brackets."""
    host = "127.0.0.1" if is_wildcard(host) else host.strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"

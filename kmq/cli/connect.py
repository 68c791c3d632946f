"""What every broker command of the CLI shares: the connection options, the broker check
before any work, one ``error: ...`` line and exit status 1 for a kmq error, and safe printing.

Every command takes ``--bootstrap-servers`` (``KMQ_BOOTSTRAP_SERVERS``) and
``--token`` (``KMQ_TOKEN``), checks that a broker answers within
``--connect-timeout-s`` before doing anything (so a broker that is down is
an error naming the address and how long we tried, not a hang), and turns
kmq errors into one ``error: ...`` line and exit status 1. ``rich`` is
imported only when a command prints.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from typing import Any, Callable

import click
from click.core import ParameterSource

from kmq.cli.option_checks import positive_seconds
from kmq.errors import BrokerUnavailableError, KmqError, TokenRefusedError
from kmq.settings import Settings

def console(stderr: bool = False) -> Any:
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (pipes, tests): wide enough that rows never wrap.
    return Console(file=stream, width=None if stream.isatty() else 200, highlight=False)


# What rewrites a terminal or reorders what it shows: C0 and C1 control characters (escape
# sequences), Unicode bidi controls (U+202E shows "abc" as "cba") and line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object, newlines: bool = False) -> str:
    """Text any client could have written (a topic's values, reasons, headers, queue names; a
    tracker's answer), safe to print: the characters above as escapes (``\\x1b``, ``\\u202e``),
    so an operator sees what was sent without their terminal being rewritten. ``newlines``
    keeps line ends (an error's own lines)."""
    text = str(text)
    if newlines:
        return "\n".join(_UNSAFE.sub(_escaped, line) for line in text.split("\n"))
    return _UNSAFE.sub(_escaped, text)


def shown(text: object) -> str:
    """:func:`printable` text for rich, markup escaped too (a payload of ``[/]`` or
    ``[link=...]`` is printed as it is, not interpreted)."""
    from rich.markup import escape
    return escape(printable(text))


def fail(message: str) -> None:
    click.echo(f"error: {printable(message, newlines=True)}", err=True)
    sys.exit(1)


TOKEN_GIVEN_AS = "--token / KMQ_TOKEN"  # where a CLI user gives the token (the SDK: token=...)


def option_name(keyword: str) -> str:
    """How a CLI user gave a setting: its option (``bootstrap_servers`` -> ``--bootstrap-servers``)."""
    return "--" + keyword.replace("_", "-")


def connection_options(fun: Callable) -> Callable:
    """--bootstrap-servers, --token, --connect-timeout-s; passes ``settings`` to the command."""

    @click.option("--bootstrap-servers", envvar="KMQ_BOOTSTRAP_SERVERS", default=None,
                  help="host:port[,host:port] of the Kafka brokers (KMQ_BOOTSTRAP_SERVERS).")
    @click.option("--token", envvar="KMQ_TOKEN", default=None,
                  help="Token presented when auth is on (KMQ_TOKEN).")
    @click.option("--connect-timeout-s", default=10.0, show_default=True, type=float,
                  callback=positive_seconds, help="How long to wait for a broker before giving up.")
    @functools.wraps(fun)
    def wrapper(bootstrap_servers: str | None, token: str | None, connect_timeout_s: float,
                **kwargs: Any) -> Any:
        # Values click read from KMQ_* variables are left to Settings.from_env, which reads
        # them too: passed on, an error named an option that was never given.
        source = click.get_current_context().get_parameter_source
        if source("bootstrap_servers") is not ParameterSource.COMMANDLINE:
            bootstrap_servers = None
        if source("token") is not ParameterSource.COMMANDLINE:
            token = None
        try:
            settings = Settings.from_env(bootstrap_servers=bootstrap_servers, token=token, given_as=option_name)
            check_broker(settings, connect_timeout_s)
            return fun(settings=settings, **kwargs)
        except TokenRefusedError as exc:  # the SDK's message names its KMQ_TOKEN or token=...
            fail(f"{exc.reason} ({TOKEN_GIVEN_AS})")
        except KmqError as exc:
            fail(str(exc))

    return wrapper


MAX_SETUP_TIMEOUT_MS = 2_147_483_647  # librdkafka's bound of socket.connection.setup.timeout.ms


def check_config(config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """The broker check's librdkafka config: a connection attempt may take the whole wait, within
    librdkafka's bounds (a --connect-timeout-s of 1e9 was a traceback naming the setting)."""
    return {**config, "log_level": 0,  # our error says it all
            "socket.connection.setup.timeout.ms": min(MAX_SETUP_TIMEOUT_MS, max(1000, int(timeout_s * 1000)))}


def check_broker(settings: Settings, timeout_s: float) -> None:
    """Raise BrokerUnavailableError (address, time tried) unless a broker answers in time."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kmq.kafka.profiles import client_config

    admin = AdminClient(check_config(client_config(settings), timeout_s))
    started = time.monotonic()
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {settings.bootstrap_servers} (tried for "
            f"{time.monotonic() - started:.1f} s; --bootstrap-servers / KMQ_BOOTSTRAP_SERVERS): "
            f"{exc.args[0].str() if exc.args and hasattr(exc.args[0], 'str') else exc}") from exc

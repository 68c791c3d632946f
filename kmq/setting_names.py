"""Names given to :class:`kmq.settings.Settings` that name nothing: a misspelt keyword is a
ConfigError naming the setting meant, a misspelt ``KMQ_*`` variable a warning naming the
variable meant (either was silently a default before, or a TypeError from the dataclass)."""

from __future__ import annotations

import difflib
import logging
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

from kmq.errors import ConfigError

# KMQ_* variables read elsewhere, not through Settings: kmq.config_reference.OTHER_VARIABLES
# documents each (a test keeps the two equal); and prefixes of the variables our tests,
# benchmarks and examples set. Settings.from_env warns about any other KMQ_* variable.
OTHER_VARIABLE_NAMES = ("KMQ_TRACKER_URL", "KMQ_SERVICE_ROOT", "KMQ_DISPATCH_TRACE", "KMQ_TEST_WORKERS")
OTHER_VARIABLE_PREFIXES = ("KMQ_TEST_", "KMQ_CHAOS_", "KMQ_EXAMPLE_", "KMQ_BENCH_")

log = logging.getLogger("kmq.settings")
_WARNED: set[str] = set()  # unknown KMQ_* variables already warned about in this process


def check_keywords(given: Mapping[str, Any], names: Sequence[str]) -> None:
    """A misspelt setting (``kmq.Client(bootstrap_server=...)``) is a ConfigError naming the
    setting meant, not a TypeError from the dataclass."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        near = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise ConfigError(f"no setting {unknown[0]!r}; {hint}a setting's keyword is its KMQ_* "
                          "variable's name in lower case without KMQ_ (docs/configuration.md)")


def sdk_keyword(name: str) -> str:
    return f"the keyword {name} of Settings / kmq.Client"


@contextmanager
def keywords_named(given: Mapping[str, Any], given_as: Callable[[str], str] = sdk_keyword) -> Iterator[None]:
    """A ConfigError about a variable that was given as a keyword (``kmq.Client(
    visibility_timeout_s=0)``) names the keyword too: the caller set no ``KMQ_*`` variable.
    ``given_as`` says how the caller gave it (a CLI: its option)."""
    try:
        yield
    except ConfigError as exc:
        text = str(exc)
        named = [k for k in given if re.search(rf"\bKMQ_{k.upper()}\b", text) and not text.startswith(f"{k}=")]
        if not named:
            raise
        raise type(exc)(f"{text} (given as {', '.join(map(given_as, named))})") from None


def warn_unknown_variables(env: Mapping[str, str], setting_variables: Sequence[str]) -> None:
    """Log once per process each ``KMQ_*`` variable in ``env`` that kmq does not read (a
    misspelt one would otherwise be silently ignored), naming the nearest one kmq reads."""
    # A warning, not a ConfigError: during a rolling upgrade a fleet may already set a variable
    # that only the newer kmq reads, and applications may name their own variables KMQ_*.
    known = [*setting_variables, *OTHER_VARIABLE_NAMES]
    for name in sorted(env):
        if (not name.startswith("KMQ_") or name in known or name in _WARNED
                or name.startswith(OTHER_VARIABLE_PREFIXES)):
            continue
        _WARNED.add(name)
        # Compared without the KMQ_ every name shares (else KMQ_QWERTY "means" KMQ_WEB_PORT).
        near = difflib.get_close_matches(name[4:], [k[4:] for k in known], n=1)
        hint = f"; did you mean KMQ_{near[0]}?" if near else ""
        log.warning("%s is not a kmq variable and is ignored%s (kmq's variables: "
                    "docs/configuration.md)", name, hint)

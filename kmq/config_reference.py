"""The configuration reference (docs/configuration.md, ``kmq config-reference``): every
:class:`~kmq.settings.Settings` field, the ``KMQ_*`` variables that are not settings, and
what each profile gives librdkafka and Faust."""

from __future__ import annotations

import dataclasses

from kmq.setting_names import OTHER_VARIABLE_PREFIXES
from kmq.settings import Settings


# KMQ_* variables that are not settings: the one program named reads each directly, not through
# Settings. tests/unit/test_settings.py fails when the code reads one not listed here (or in Settings).
# kmq.setting_names.OTHER_VARIABLE_NAMES names the same variables (Settings.from_env does not warn about
# them; kmq.settings may not import this module): tests/unit/test_settings_unknown_variables.py
# keeps the two equal.
OTHER_VARIABLES = (
    # (variable, who reads it, default, meaning)
    ("KMQ_TRACKER_URL", "`kmq stats` (kmq/cli/ops.py), as its `--url`",
     "`http://KMQ_WEB_HOST:KMQ_WEB_PORT` (loopback for a wildcard host)",
     "A tracker worker's web address to ask for queue numbers"),
    ("KMQ_SERVICE_ROOT", "`kmq dev`, `kmq bench` (kmq/dev/devstack.py, kmq/dev/bench.py)",
     "the working directory, else the checkout kmq runs from",
     "The checkout holding the tracker service (`app/`, `agents/`, `tables/`) and `bench/`; "
     "set to a directory without the service, the command stops with an error naming it"),
    ("KMQ_DISPATCH_TRACE", "the tracker worker (agents/dispatch/dispatcher.py), at import", "(empty)",
     "Any non-empty value: the shared-queue dispatcher logs its reads, busy rounds, CREDITs, "
     "ACQUIREs and lane writes at INFO (`TRACE ...` lines; diagnosis only, a line per marker)"),
    ("KMQ_TEST_WORKERS", "`scripts/test`", "`6`",
     "pytest-xdist workers of the whole suite (0: serially)"),
)


def reference_markdown() -> str:
    """The configuration reference (docs/configuration.md), generated from :class:`Settings`
    and :data:`OTHER_VARIABLES`."""
    rows = [
        "# Configuration reference",
        "",
        "Generated from `kmq/settings.py` by `kmq config-reference`; do not edit by hand.",
        "The SDK (`kmq.Client()`) and the tracker (`faust -A app worker`) read the same",
        "`KMQ_*` variables; `kmq.Client(...)` keyword arguments override them, each named as its",
        "variable in lower case without `KMQ_` (`kmq.Client(compression=\"zstd\")`); a keyword",
        "that names no setting is a `ConfigError` naming the nearest one. A `KMQ_*` variable",
        "that names nothing below is ignored with a warning naming the nearest one (except",
        ", ".join(f"`{prefix}*`" for prefix in OTHER_VARIABLE_PREFIXES) + ", which tests,",
        "benchmarks and examples use).",
        "",
        "A variable set to the empty string counts as unset (its default applies); one of only",
        "spaces does not (it is refused as below). Every value is",
        "checked when the settings are read, by the SDK, the tracker and the `kmq` commands alike: a",
        "number that is not one (a whole number where the default is one), not finite, or out of",
        "its range (above 0 unless its meaning says what 0 does, within any bounds it states), or a",
        "word not among those listed, is a `ConfigError` naming the variable (and the keyword, or",
        "the `kmq` command's option, for a value given as one) and the fix; a `kmq` command that",
        "reads them, and the tracker",
        "(`faust -A app worker`, before it connects to a broker), prints it as one `error: ...` line,",
        "exit status 1. A number is written in ASCII digits (with a sign, a point or an exponent",
        "where it may have them); spaces around it are ignored, `6_066` is refused. A word is",
        "written as listed, in that case (`KMQ_SECURITY_PROTOCOL` and `KMQ_SASL_MECHANISM` alone",
        "take any case and surrounding spaces, as Kafka clients do).",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
    ]
    for f in dataclasses.fields(Settings):
        default = f.default if f.default != "" else "(empty)"
        rows.append(f"| `{f.metadata['env']}` | `{default}` | {f.metadata['doc']} |")
    rows += [
        "",
        "## Other variables",
        "",
        "Not settings: the program named reads each directly (not through `kmq.settings`);",
        "`kmq.Client` reads none of them.",
        "",
        "| variable | read by | default | meaning |",
        "| --- | --- | --- | --- |",
        *(f"| `{name}` | {reader} | {default} | {meaning} |"
          for name, reader, default, meaning in OTHER_VARIABLES),
    ]
    from kmq.kafka.profiles import reference_markdown as profiles_markdown
    return "\n".join(rows) + "\n\n" + profiles_markdown()

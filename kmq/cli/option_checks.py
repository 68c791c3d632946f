"""Checks of the ``kmq`` commands' option values, run by click before the command (so before
the broker check): a bad value is a usage error naming the option, exit status 2. click's
FloatRange lets nan through (every comparison with it is false), hence these."""

from __future__ import annotations

import math

import click

from kmq.protocol.limits import MIN_RATE_PER_S


MAX_WAIT_S = 86_400.0  # a day: librdkafka's timeouts are 32-bit ms (2,147,483 s; above, a live
# broker was reported down), and 1e10 overflowed datetime and time.sleep (tracebacks)


def positive_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A wait in seconds: finite, above 0 and at most a day (librdkafka takes -1 as "wait without
    end", and 0 gave up without trying; socket timeouts refuse nan and negatives with a traceback)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_WAIT_S):
        raise click.BadParameter(f"{value!r}: give a number of seconds above 0 and at most "
                                 f"{MAX_WAIT_S:.0f} (a day), e.g. 10")
    return value


def delay_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A delay: none, or finite and 0 or more (the upper bound is KMQ_MAX_DELAY_S, the SDK's check)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value!r}: give a number of seconds, 0 or more, e.g. 90")
    return value


def positive_rate(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Messages per second: finite and at least MIN_RATE_PER_S (nan made the rate limit never
    wait; 1e-300 a wait too long for time.sleep)."""
    if not (math.isfinite(value) and value >= MIN_RATE_PER_S):
        raise click.BadParameter(f"{value!r}: give a number of messages per second, at least "
                                 f"{MIN_RATE_PER_S:g} (one every {1 / MIN_RATE_PER_S:g} s), e.g. 200")
    return value


def header_pairs(ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]) -> dict[str, str]:
    """-H NAME=VALUE pairs, checked before the broker is (a usage error, exit status 2), as the
    SDK checks headers (an empty name, kmq's own prefix, text that is not valid UTF-8)."""
    from kmq.errors import ConfigError
    from kmq.send_args import check_headers
    out = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"{p!r}: use NAME=VALUE")
        k, v = p.split("=", 1)
        if k in out:  # a record's headers here are a dict: the first was dropped silently
            raise click.BadParameter(f"{k!r} given twice: give each header name once")
        if not k:
            raise click.BadParameter(f"{p!r}: the header name is empty: use NAME=VALUE")
        try:
            (k + v).encode()
        except UnicodeEncodeError:  # bytes the OS gave that are not UTF-8 (surrogate escapes)
            raise click.BadParameter(f"{p!r}: not valid UTF-8 text: give header names and values "
                                     "in UTF-8") from None
        try:
            check_headers({k: v})
        except ConfigError as exc:  # was an error after the broker check, exit status 1
            raise click.BadParameter(f"{p!r}: {exc}") from None
        out[k] = v
    return out


# The addresses `kmq dev` prints (web view, API, metrics) and users copy: the tracker's base is before them.
TRACKER_PATHS = ("/kmq/ui", "/kmq/api/queues", "/kmq/health", "/metrics")


def tracker_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A tracker's web address, ``http(s)://host[:port][/prefix]``, as its base without a trailing
    slash; one of the tracker's own paths (``.../kmq/ui``, ``.../kmq/api/queues``) is cut off.
    Anything else is a usage error saying what to give (urllib raised a ValueError, a traceback,
    for one without a scheme; one with a path was asked for PATH/kmq/api/queues, a bare 404)."""
    from urllib.parse import urlsplit
    if value is None:
        return None
    where = f"{value!r} (--url / KMQ_TRACKER_URL)"
    example = "a tracker worker's web address, e.g. http://127.0.0.1:6066"
    if "://" not in value and value.strip():
        raise click.BadParameter(f"{where} has no scheme: give http://{value.strip()} (or https://...)")
    if any(ch.isspace() or not ch.isprintable() for ch in value):  # http.client's InvalidURL
        raise click.BadParameter(f"{where} holds a space or a control character: give {example}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{where}: give {example}")
    if parts.username is not None:  # urllib took "user:pw@host" for the host name (and we printed it)
        raise click.BadParameter(f"{where} holds a user name: give the address without it, and the "
                                 "token with --token / KMQ_TOKEN")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise click.BadParameter(f"{where}: give the address without '?...' or '#...', e.g. "
                                 f"{parts.scheme}://{parts.netloc}")
    path = parts.path.rstrip("/")
    for own in TRACKER_PATHS:
        if path.endswith(own):
            path = path[:-len(own)]
            break
    return f"{parts.scheme}://{parts.netloc}{path}"


ALL = "all"  # --limit's value for no limit


def count_limit(all_means: str | None = None):
    """A ``--limit`` check: a whole number, 1 or more, or (where ``all_means`` says what that is)
    ``all``, no limit (None). 0 is refused on every command: it meant "all" to ``dlq list``
    and "none" to ``dlq redrive`` (which then moved nothing, exit status 0)."""
    def check(ctx: click.Context, param: click.Parameter, value: object) -> int | None:
        if value is None or (all_means and value == ALL):
            return None
        try:
            count = int(value)  # type: ignore[call-overload]
        except ValueError:
            count = 0
        if count < 1:
            fix = f", or {ALL!r} for {all_means}" if all_means else ""
            raise click.BadParameter(f"{str(value)!r}: give a whole number, 1 or more{fix}")
        return count
    return check

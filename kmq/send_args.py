"""What a send may carry, checked before anything is written; pure.

A bad argument raises :class:`~kmq.errors.ConfigError` naming it and the fix, so a send
either writes a valid record or nothing (``Client.send`` and ``send_batch``, and
``kmq.aio``'s client through them).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from kmq.errors import ConfigError, MessageTooLargeError
from kmq.protocol import envelope
from kmq.protocol.ordering import MAX_DEDUP_ID_BYTES, MAX_GROUP_BYTES
from kmq.protocol.placement import validate_queue_name

HEADER_OVERHEAD_BYTES = 64  # record framing beyond key, value and header bytes


def finite_s(name: str, value: Any) -> float:
    """A delay or time argument: a finite number of seconds (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be a finite number of seconds")
    return float(value)


def check_value(value: Any, name: str = "value") -> bytes:
    """A message's value: bytes-like, as bytes (``name``: how the caller passed it)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ConfigError(
        f"{name} must be bytes, not {type(value).__name__}: encode it first, e.g. value.encode()")


def check_values(values: Any) -> list[bytes]:
    """``send_batch``'s values: an iterable of bytes-like values, as bytes. One bytes or str
    value is refused: iterated, it was a batch of ints (or of one-letter strings)."""
    if isinstance(values, (bytes, bytearray, memoryview, str)):
        raise ConfigError(f"values must be a list of bytes values, not one {type(values).__name__} value: "
                          "send_batch(queue, [value]), or client.send(queue, value) for one")
    try:
        items = list(values)
    except TypeError:
        raise ConfigError(f"values must be a list of bytes values, not {type(values).__name__}") from None
    if set(map(type, items)) <= {bytes}:  # the hot path, asked in C: bytes as given
        return items
    return [check_value(v, f"values[{i}]") for i, v in enumerate(items)]


def _order_bytes(name: str, value: str | bytes, limit: int) -> bytes:
    try:
        raw = value.encode() if isinstance(value, str) else value
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 bytes to send
        raise ConfigError(f"{name}={value!r} is not valid UTF-8 text: give a str without lone "
                          "surrogates, or the bytes") from exc
    if not isinstance(raw, (bytes, bytearray)) or not 1 <= len(raw) <= limit:
        raise ConfigError(f"{name}={value!r} must be a str or bytes of 1 to {limit} bytes")
    return bytes(raw)


def order_headers(group: str | bytes | None, dedup_id: str | bytes | None) -> list[tuple[str, bytes]]:
    """The ``kmq.group`` / ``kmq.dedup-id`` headers of a send (none without them: no cost)."""
    out = []
    if group is not None:
        out.append((envelope.GROUP, _order_bytes("group", group, MAX_GROUP_BYTES)))
    if dedup_id is not None:
        out.append((envelope.DEDUP_ID, _order_bytes("dedup_id", dedup_id, MAX_DEDUP_ID_BYTES)))
    return out


def check_headers(headers: Mapping[str, bytes | str] | None) -> list[tuple[str, bytes]]:
    """User headers as (name, bytes) pairs: names non-empty and not kmq's own, values bytes or str."""
    if headers is None:
        return []
    if not isinstance(headers, Mapping):
        raise ConfigError(f"headers must be a dict of str to bytes, not {type(headers).__name__}")
    out = []
    for k, v in headers.items():
        if not isinstance(k, str) or not k:
            raise ConfigError(f"header name {k!r} must be a non-empty string")
        if k.startswith(envelope.RESERVED_PREFIX):
            raise ConfigError(f"header {k!r}: names starting with 'kmq.' are kmq's own; rename it")
        if not _utf8(k):  # a lone surrogate: no UTF-8 bytes to send (a UnicodeEncodeError)
            raise ConfigError(f"header name {k!r} is not valid UTF-8 text: give a str without lone surrogates")
        if isinstance(v, str):
            if not _utf8(v):
                raise ConfigError(f"header {k!r} value {v!r} is not valid UTF-8 text: give a str without "
                                  "lone surrogates, or the bytes")
            v = v.encode()
        elif not isinstance(v, (bytes, bytearray)):
            raise ConfigError(f"header {k!r} value must be bytes or str, not {type(v).__name__}")
        out.append((k, bytes(v)))
    return out


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_send(queue: Any, value: Any, headers: Mapping[str, bytes | str] | None, group: str | bytes | None,
               dedup_id: str | bytes | None) -> tuple[str, bytes, list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """One send's queue, value, user headers and order headers, each checked (``Client.send``;
    ``kmq.aio`` asks before it looks anything up on the broker)."""
    return validate_queue_name(queue), check_value(value), check_headers(headers), order_headers(group, dedup_id)


def refuse_batch_options(given: Mapping[str, Any]) -> None:
    """``send_batch`` takes a queue, values and headers: a send's other arguments (a delay, a
    group, a dedup id) name ``send`` as the way (they were a bare TypeError)."""
    if given:
        name = sorted(given)[0]
        known = {"delay_s", "deliver_at", "group", "dedup_id"}
        if name in known:
            raise ConfigError(f"send_batch takes no {name}: its messages are enqueued now, without "
                              f"group or dedup id; use send(queue, value, {name}=...) for each")
        raise ConfigError(f"send_batch: no option {name!r}; it takes queue, values and headers")


def check_size(queue: str, payload: bytes, headers: list[tuple[str, bytes]], max_bytes: int) -> None:
    """One send's payload, with its key (the queue) and ``headers``, within ``max_bytes``
    (``KMQ_MAX_MESSAGE_BYTES``)."""
    size = len(payload) + len(queue) + headers_bytes(headers)
    if size + HEADER_OVERHEAD_BYTES > max_bytes:
        raise _too_large("value", queue, size, max_bytes)


def check_sizes(queue: str, payloads: list[bytes], headers: list[tuple[str, bytes]], max_bytes: int,
                label: Callable[[int], str]) -> None:
    """:func:`check_size` of many payloads with the same headers; the first too large raises,
    named by ``label(i)``."""
    extra = len(queue) + headers_bytes(headers)
    for i, p in enumerate(payloads):
        if len(p) + extra + HEADER_OVERHEAD_BYTES > max_bytes:
            raise _too_large(label(i), queue, len(p) + extra, max_bytes)


def headers_bytes(headers: list[tuple[str, bytes]]) -> int:
    """What ``headers`` take on the wire: names in UTF-8 bytes, not characters (a name of
    3,000 '€' counted 3,000 and the broker refused the record's 9,000 with a librdkafka
    error instead of MessageTooLargeError)."""
    return sum((len(k) if k.isascii() else len(k.encode())) + len(v) for k, v in headers)


def _too_large(what: str, queue: str, size: int, max_bytes: int) -> MessageTooLargeError:
    return MessageTooLargeError(f"{what} of queue {queue!r} is {size} bytes with key and headers; the broker "
                                f"accepts {max_bytes} (KMQ_MAX_MESSAGE_BYTES): send less")

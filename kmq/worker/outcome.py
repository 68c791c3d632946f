"""What a handler's return or exception does to its message: a pure decision.

- returned: ``ack``;
- raised :class:`Reject`, or an exception of a non-retryable type: ``reject`` now, with the
  reason;
- raised anything else: ``release`` with the queue's backoff, until the delivery that is the
  queue's ``max_deliveries``-th: then ``reject`` with the exception's type and message as the
  reason (truncated; the dead letter says why, not only "max-deliveries").

Pure: no message, consumer or clock; :func:`decide` is what the runner and the tests share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

REASON_MAX_BYTES = 512  # a dead letter's reason: enough to say why, not a whole traceback


class Reject(Exception):
    """Raise in a handler to dead-letter its message now, with ``reason`` (no retry).

    A ``reason`` that is not a string is taken as ``str(reason)`` (``Reject(404)``: "404"):
    refusing it here would turn the handler's reject into a retried failure."""

    def __init__(self, reason: object = "") -> None:
        super().__init__(reason)
        self.reason = _text_of(reason)


@dataclass(frozen=True)
class Outcome:
    """``verb`` of the message and, for ``reject``, the dead letter's reason."""

    verb: Literal["ack", "release", "reject"]
    reason: str = ""


ACK = Outcome("ack")
RELEASE = Outcome("release")


def failure_reason(exc: BaseException, limit_bytes: int = REASON_MAX_BYTES) -> str:
    """``"Type: message"`` of ``exc`` (a :class:`Reject`: its reason) on one line, cut to
    ``limit_bytes`` of UTF-8. Never raises: a reason the message could not be rejected with
    (a lone surrogate, a ``__str__`` that fails) left the message held until it lapsed, its
    settle failing with a traceback at every delivery (an audit)."""
    if isinstance(exc, Reject):
        text = one_line(_text_of(exc.reason))
    else:
        message = one_line(_text_of(exc))
        text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return truncate_utf8(text, limit_bytes)


def _text_of(value: object) -> str:
    """``str(value)``, or what it is when its ``__str__`` fails."""
    try:
        return value if isinstance(value, str) else str(value)
    except Exception as exc:  # a user's __str__: any error (one returning no str included)
        return f"<{type(value).__name__}: str() raised {type(exc).__name__}>"


def one_line(text: str) -> str:
    """``text``'s lines joined by a space: every line break ``str.splitlines`` knows (``\\r``,
    ``\\r\\n``, U+2028, ...), not only ``\\n``; blank lines dropped."""
    return " ".join(filter(None, map(str.strip, text.splitlines())))


def truncate_utf8(text: str, limit_bytes: int) -> str:
    """``text`` as UTF-8 text (a lone surrogate, which UTF-8 cannot carry, becomes "?") cut
    to at most ``limit_bytes`` bytes, ending in "..." when cut."""
    raw = text.encode(errors="replace")
    if len(raw) <= limit_bytes:
        return raw.decode()
    return raw[:max(0, limit_bytes - 3)].decode(errors="ignore") + "..."


def decide(exc: BaseException | None, *, delivery_count: int, max_deliveries: int,
           non_retryable: tuple[type[BaseException], ...] = ()) -> Outcome:
    """The verb for a handler that returned (``exc`` None) or raised ``exc``."""
    if exc is None:
        return ACK
    if isinstance(exc, Reject) or (non_retryable and isinstance(exc, non_retryable)):
        return Outcome("reject", failure_reason(exc))
    if delivery_count >= max_deliveries:
        return Outcome("reject", failure_reason(exc))
    return RELEASE

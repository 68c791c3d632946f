"""W3C trace context from ``send`` to the handler, when OpenTelemetry is installed.

Optional (extra ``kmq[tracing]``): without ``opentelemetry-api`` both functions do
nothing. A send made inside a span carries ``traceparent`` (and ``tracestate``) as user
headers, the way Kafka instrumentations do; a ``@kmq.handler`` runs in a CONSUMER span
that is a child of it (OpenTelemetry's messaging conventions: ``<queue> process``).
Nothing is exported unless the application configures an OpenTelemetry SDK.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping

try:  # optional: never a dependency of the SDK
    from opentelemetry import context, propagate, trace
except ImportError:  # pragma: no cover - exercised where OpenTelemetry is absent
    context = propagate = trace = None  # type: ignore[assignment]

HEADERS = ("traceparent", "tracestate")


def trace_headers(given: Mapping[str, object] | list[tuple[str, bytes]] = ()) -> list[tuple[str, bytes]]:
    """The current span's ``traceparent``/``tracestate`` headers (none outside a span, none
    without OpenTelemetry, none that the sender gave itself)."""
    if propagate is None or not context.get_current():
        return []  # the hot path of a send outside any span: one context-variable read
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return []
    names = {k for k, _ in given} if isinstance(given, list) else set(given)
    return [(k, carrier[k].encode()) for k in HEADERS if k in carrier and k not in names]


@contextmanager
def handling(queue: str, handler: str, message_id: str, headers: Mapping[str, bytes]) -> Iterator[None]:
    """Run a handler call inside a CONSUMER span continuing the sender's trace."""
    if trace is None:
        yield
        return
    carrier = {k: v.decode(errors="replace") for k, v in headers.items() if k in HEADERS}
    parent = propagate.extract(carrier) if carrier else None
    tracer = trace.get_tracer("kmq.worker")
    with tracer.start_as_current_span(
            f"{queue} process", context=parent, kind=trace.SpanKind.CONSUMER,
            attributes={"messaging.system": "kmq", "messaging.destination.name": queue,
                        "messaging.message.id": message_id, "code.function": handler}):
        yield

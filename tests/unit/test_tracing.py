"""W3C trace context (kmq.tracing): a send inside a span carries traceparent; a handler call
runs in a CONSUMER span of the same trace; outside a span nothing is added."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kmq.tracing import handling, trace_headers

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    p = trace.get_tracer_provider()
    if not isinstance(p, TracerProvider):  # set once per process (OpenTelemetry's rule) ...
        p = TracerProvider()
        trace.set_tracer_provider(p)
    p.add_span_processor(SimpleSpanProcessor(EXPORTER))  # ... by this test or another one
    return p


def test_outside_a_span_a_send_carries_no_trace_headers():
    assert trace_headers([]) == []


def test_a_send_in_a_span_carries_its_traceparent_and_the_handler_continues_the_trace():
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as parent:
        headers = dict(trace_headers([("h", b"v")]))
        assert trace_headers([("traceparent", b"mine")]) == []  # the sender's own wins
    trace_id = f"{parent.get_span_context().trace_id:032x}"
    assert headers["traceparent"].decode().split("-")[1] == trace_id
    EXPORTER.clear()
    with handling("emails", "jobs.send_email", "id-1", headers):
        inside = trace.get_current_span().get_span_context()
    (span,) = EXPORTER.get_finished_spans()
    assert span.name == "emails process" and span.kind == trace.SpanKind.CONSUMER
    assert inside.trace_id == parent.get_span_context().trace_id
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.attributes["messaging.message.id"] == "id-1"


def test_a_message_without_trace_headers_starts_a_new_trace():
    EXPORTER.clear()
    with handling("emails", "h", "id-2", {"h": b"v"}):
        pass
    (span,) = EXPORTER.get_finished_spans()
    assert span.parent is None

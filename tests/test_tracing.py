"""OpenTelemetry: the attempt's span is a child of the span that enqueued the job, through
the trace context stored with the job (not in its payload); a delivery's SMTP span is a
child of its attempt, with an event per stage. An in-memory exporter collects the spans."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mailfathom import JobContext, MailFathom, PermanentFailure
from mailfathom.delivery.phases import PHASE_POINTS
from mailfathom.observability import tracing
from smtp_fixtures import FaultServer


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider of the test's own, exporting to memory, set for mailfathom."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_provider(provider)
    yield provider, exporter
    tracing.set_provider(None)
    provider.shutdown()


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    found = {span.name: span for span in exporter.get_finished_spans()}
    assert len(found) == len(exporter.get_finished_spans()), "span names repeat"
    return found


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_attempt_span_is_a_child_of_the_enqueueing_span(
    mf: MailFathom, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("app")

    @mf.job("k")
    def k(ctx: JobContext, n: int) -> None:
        with tracer.start_as_current_span("inside"):
            pass

    payload = {"n": 7}
    with tracer.start_as_current_span("request"):
        job = mf.enqueue("k", payload)
    assert job.trace_context is not None
    assert mf.jobs.get(job.id).payload == payload  # the context is not in the payload
    assert mf.worker().run(burst=True) == 1

    found = by_name(exporter)
    request, enqueue = found["request"], found["enqueue k"]
    attempt, inside = found["attempt k"], found["inside"]
    assert enqueue.kind is SpanKind.PRODUCER
    assert attempt.kind is SpanKind.CONSUMER
    assert parent_of(enqueue) == request.context.span_id
    assert parent_of(attempt) == enqueue.context.span_id
    assert parent_of(inside) == attempt.context.span_id  # the handler ran inside the attempt
    assert {s.context.trace_id for s in (request, enqueue, attempt, inside)} == {
        request.context.trace_id
    }
    context = enqueue.context
    assert job.trace_context == (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    )
    assert attempt.attributes is not None
    assert attempt.attributes["mailfathom.job.id"] == job.id
    assert attempt.attributes["mailfathom.attempt.outcome"] == "Succeeded"
    assert attempt.status.status_code is StatusCode.UNSET


def test_async_handler_and_failure_spans(
    mf: MailFathom, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("app")

    @mf.job("a")
    async def a(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        with tracer.start_as_current_span("inside async"):
            raise PermanentFailure("nope")

    with tracer.start_as_current_span("request"):
        mf.enqueue_many("a", [{}])
    mf.worker().run(burst=True)
    found = by_name(exporter)
    attempt = found["attempt a"]
    assert parent_of(attempt) == found["enqueue a"].context.span_id
    assert parent_of(found["inside async"]) == attempt.context.span_id
    assert attempt.status.status_code is StatusCode.ERROR
    assert attempt.attributes is not None
    assert attempt.attributes["mailfathom.attempt.outcome"] == "Failed"


def test_jobs_enqueued_without_tracing_carry_no_context(mf: MailFathom) -> None:
    assert not tracing.enabled()
    job = mf.enqueue("k", {"x": 1})
    assert job.trace_context is None
    assert mf.jobs.get(job.id).trace_context is None


def test_smtp_submission_span_has_an_event_per_stage(
    mail_app: MailFathom, smtp: FaultServer, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    message = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"
    with provider.get_tracer("app").start_as_current_span("signup"):
        mail_app.outbox.record(message, sender="a@example.com", recipients=["b@example.com"])
    mail_app.worker().run(burst=True)
    assert len(smtp.accepted()) == 1
    found = by_name(exporter)
    enqueue = found["enqueue mailfathom.deliver"]
    attempt = found["attempt mailfathom.deliver"]
    submission = found["smtp submission"]
    assert parent_of(enqueue) == found["signup"].context.span_id
    assert parent_of(attempt) == enqueue.context.span_id
    assert parent_of(submission) == attempt.context.span_id
    assert submission.kind is SpanKind.CLIENT
    assert [event.name for event in submission.events] == [*PHASE_POINTS, "sent"]
    assert submission.attributes is not None
    assert submission.attributes["smtp.reply.code"] == 250
    assert submission.attributes["mailfathom.submission.outcome"] == "sent"
    assert submission.attributes["mailfathom.transport"] == "smtp"

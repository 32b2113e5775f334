"""An HTTP submission is traced and counted as an SMTP one is, on every store, against the
fake provider on loopback: a ``<transport name> submission`` CLIENT span, child of its
delivery attempt, with an event per point of the submission, the HTTP status and the
outcome; ``mailfathom_email_submissions_total`` and ``mailfathom_http_responses_total``
labelled with the transport's name (and no SMTP reply counted for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from fake_provider import Answer, FakeProvider
from mailfathom import HttpJsonTransport, MailFathom
from mailfathom.clock import FakeClock
from mailfathom.observability import metrics, tracing

MESSAGE = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"
HTTP_POINTS = ["after_354", "after_begun", "after_body", "after_reply"]


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


@pytest.fixture
def installed() -> Iterator[metrics.Metrics]:
    """Fresh metrics installed for the test, uninstalled after it."""
    made = metrics.install()
    yield made
    metrics.uninstall()


@pytest.fixture
def http_app(database_url: str, clock: FakeClock, provider: FakeProvider) -> Iterator[MailFathom]:
    """A migrated app whose deliveries go to the fake provider, as transport "acme"."""
    transport = HttpJsonTransport(provider.url, name="acme", timeout=2.0)
    mf = MailFathom(database_url, clock=clock, transport=transport)
    mf.migrate()
    yield mf
    mf.close()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def test_an_http_submission_span_is_named_after_the_transport_with_its_status(
    http_app: MailFathom,
    provider: FakeProvider,
    clock: FakeClock,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer, exporter = spans
    provider.script = [Answer(503, {"message": "maintenance"})]
    with tracer.get_tracer("app").start_as_current_span("signup"):
        recorded = http_app.outbox.record(
            MESSAGE, sender="a@example.com", recipients=["b@example.com"]
        )
    http_app.worker().run(burst=True)  # 503: retried
    clock.advance(7200)  # past the retry's backoff
    http_app.worker().run(burst=True)  # 200: sent
    assert len(provider.requests) == 2
    attempts = named(exporter, "attempt mailfathom.deliver")
    retried, sent = named(exporter, "acme submission")
    assert not named(exporter, "smtp submission")
    for span, attempt in zip((retried, sent), attempts, strict=True):
        assert span.kind is SpanKind.CLIENT
        assert span.parent is not None and span.parent.span_id == attempt.context.span_id
        assert span.attributes is not None
        assert span.attributes["mailfathom.transport"] == "acme"
        assert span.attributes["mailfathom.email.id"] == recorded.id
    assert [event.name for event in retried.events] == [*HTTP_POINTS, "retry"]
    assert retried.attributes is not None
    assert retried.attributes["http.response.status_code"] == 503
    assert retried.attributes["mailfathom.submission.outcome"] == "retry"
    assert [event.name for event in sent.events] == [*HTTP_POINTS, "sent"]
    assert sent.attributes is not None
    assert sent.attributes["http.response.status_code"] == 200
    assert sent.attributes["mailfathom.submission.outcome"] == "sent"
    assert "smtp.reply.code" not in sent.attributes


def test_http_submissions_are_counted_with_the_transport_name(
    http_app: MailFathom, provider: FakeProvider, installed: metrics.Metrics
) -> None:
    provider.script = [Answer(), Answer(422, {"message": "bad sender"}), Answer(drop=True)]
    for _ in range(3):
        http_app.outbox.record(MESSAGE, sender="a@example.com", recipients=["b@example.com"])
        http_app.worker().run(burst=True)
    assert len(provider.requests) == 3

    def sample(name: str, **labels: str) -> float | None:
        return installed.registry.get_sample_value(name, labels)

    submissions = "mailfathom_email_submissions_total"
    for outcome in ("sent", "refused", "unknown"):
        assert sample(submissions, transport="acme", outcome=outcome) == 1
    assert sample(submissions, transport="smtp", outcome="sent") is None
    responses = "mailfathom_http_responses_total"
    for klass in ("2xx", "4xx", "none"):
        assert sample(responses, transport="acme", **{"class": klass}) == 1
    assert sample("mailfathom_smtp_replies_total", **{"class": "2xx", "phase": "rcpt"}) is None

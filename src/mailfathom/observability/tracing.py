"""OpenTelemetry spans: one per enqueue, per attempt, per SMTP submission.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Only ``opentelemetry-api`` is used (the ``otel`` extra), and only when the
application has configured an SDK tracer provider: until then :func:`enabled` is
False after one dictionary look-up (``opentelemetry.trace`` not imported means no
provider can have been set), and nothing else here runs.

- ``enqueue <kind>`` (PRODUCER) is opened around every enqueue and record; its
  W3C ``traceparent`` is stored with the job (the ``trace_context`` column, never
  in the payload);
- ``attempt <kind>`` (CONSUMER) is a child of the span that enqueued the job, and
  is the current span while a plain or ``async`` handler runs, so the handler's own
  spans (and jobs it enqueues) nest under it;
- ``smtp submission`` (CLIENT) is a child of its delivery attempt, with an event
  at each point of the staged submission and the reply on its end.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailfathom.jobs.model import Job

__all__ = [
    "attached",
    "current_traceparent",
    "enabled",
    "end_attempt",
    "enqueue_span",
    "set_provider",
    "span",
    "start_attempt",
    "within",
]

_SCOPE = "mailfathom"
_DISABLED = ("ProxyTracerProvider", "NoOpTracerProvider")


_provider: Any = None  # set_provider's; None: OpenTelemetry's global provider


def set_provider(provider: Any) -> None:
    """Trace to ``provider`` instead of OpenTelemetry's global one (None: the global one
    again). For tests and for applications that keep several providers apart."""
    global _provider  # noqa: PLW0603 - the one process-wide switch
    _provider = provider


def enabled() -> bool:
    """True when an OpenTelemetry SDK tracer provider is configured in this process."""
    if _provider is not None:
        return True
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return False
    return type(api.get_tracer_provider()).__name__ not in _DISABLED


def _api() -> Any:
    # here, not at the top: opentelemetry-api is optional (the otel extra)
    from opentelemetry import trace

    return trace


def _tracer() -> Any:
    return _api().get_tracer(_SCOPE, tracer_provider=_provider)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or None (tracing off, no span)."""
    if not enabled():
        return None
    context = _api().get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@contextmanager
def enqueue_span(kind: str, queue: str | None, count: int | None = 1) -> Iterator[None]:
    """A PRODUCER span around an enqueue (nothing when tracing is off); ``count`` None:
    a batch read from an iterable, its size not known beforehand (no count attribute)."""
    if not enabled():
        yield
        return
    trace = _api()
    attributes: dict[str, Any] = {"mailfathom.job.kind": kind}
    if count is not None:
        attributes["messaging.batch.message_count"] = count
    if queue is not None:
        attributes["mailfathom.job.queue"] = queue
    tracer = _tracer()
    with tracer.start_as_current_span(
        f"enqueue {kind}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ):
        yield


def _parent(traceparent: str | None) -> Any:
    """The OpenTelemetry context a stored ``traceparent`` stands for (None: a new trace)."""
    if not traceparent:
        return None
    # here, not at the top: opentelemetry-api is optional (the otel extra)
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def start_attempt(job: Job, started_at: datetime) -> Any:
    """Open the span of ``job``'s attempt, a child of the span that enqueued it."""
    trace = _api()
    return _tracer().start_span(
        f"attempt {job.kind}",
        context=_parent(job.trace_context),
        kind=trace.SpanKind.CONSUMER,
        start_time=int(started_at.timestamp() * 1e9),
        attributes={
            "mailfathom.job.id": job.id,
            "mailfathom.job.kind": job.kind,
            "mailfathom.job.queue": job.queue,
            "mailfathom.job.attempt": job.attempts,
        },
    )


def end_attempt(span: Any, outcome: str, message: str | None) -> None:
    """End an attempt's span with its outcome (an error status unless it succeeded)."""
    trace = _api()
    span.set_attribute("mailfathom.attempt.outcome", outcome)
    if outcome != "Succeeded":
        span.set_status(trace.Status(trace.StatusCode.ERROR, message or outcome))
    span.end()


def within(span: Any, task: Callable[[], None]) -> Callable[[], None]:
    """``task`` run with ``span`` as the current span (on whichever thread runs it)."""

    def run() -> None:
        with _api().use_span(span, end_on_exit=False):
            task()

    return run


@contextmanager
def attached(span: Any) -> Iterator[None]:
    """``span`` is current inside the block (None: nothing changes)."""
    if span is None:
        yield
        return
    with _api().use_span(span, end_on_exit=False):
        yield


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A CLIENT span, child of the current one; yields it (None when tracing is off)."""
    if not enabled():
        yield None
        return
    trace = _api()
    with _tracer().start_as_current_span(
        name, kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as current:
        yield current

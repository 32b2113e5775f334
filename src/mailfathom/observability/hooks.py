"""The calls the worker and the deliverer make at each attempt's and each SMTP
transaction's start and end (metrics and traces).

Internal. Each call does nothing but a global read or two when no metrics are
installed and no OpenTelemetry SDK is configured.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from mailfathom.observability import metrics, tracing
from mailfathom.observability.logs import log_fields

if TYPE_CHECKING:
    from mailfathom.delivery.phases import PhaseHook, PhasePoint
    from mailfathom.delivery.smtp import Outcome
    from mailfathom.jobs.worker.runner import Running

__all__ = [
    "attempt_ended",
    "attempt_started",
    "attempt_stopped",
    "submission_ended",
    "traced_phases",
]

logger = logging.getLogger(__name__)


def attempt_started(running: Running) -> None:
    """An attempt is about to start: open its span when tracing is on."""
    if tracing.enabled():
        try:
            running.span = tracing.start_attempt(running.job, running.started_at)
        except Exception:  # a tracer's failure must never stop a job
            logger.debug(
                "starting an attempt's span failed",
                exc_info=True,
                extra=log_fields("observe_failed", step="attempt_started", job_id=running.job.id),
            )


def attempt_ended(
    running: Running, outcome: str, message: str | None = None, *, duration: float | None = None
) -> None:
    """An attempt ended with ``outcome`` (an AttemptOutcome's value) and it is recorded:
    count it, end its span. ``duration``: how long it ran (default: until now)."""
    try:
        counted = metrics.current()
        if counted is not None:
            job = running.job
            counted.attempt_ended(  # positional: cheaper on the hot path
                job.kind,
                job.queue,
                outcome,
                time.monotonic() - running.began if duration is None else duration,
                job.available_at or job.created_at,
                running.started_at,
            )
        span, running.span = running.span, None
        if span is not None:
            tracing.end_attempt(span, outcome, message)
    except Exception:  # counting must never hurt the worker
        logger.debug(
            "observing an attempt's end failed",
            exc_info=True,
            extra=log_fields("observe_failed", step="attempt_ended", job_id=running.job.id),
        )


def attempt_stopped(
    running: Running, status: str = "Stopped", why: str = "this worker gave the job up"
) -> None:
    """The worker stopped an attempt it gave up (no outcome of its own: the lease's
    expiry or the shutdown records one), or its outcome was discarded (``status``
    ``Discarded``): end its span, count nothing."""
    span, running.span = running.span, None
    if span is not None:
        try:
            tracing.end_attempt(span, status, why)
        except Exception:
            logger.debug(
                "ending an attempt's span failed",
                exc_info=True,
                extra=log_fields("observe_failed", step="attempt_stopped", job_id=running.job.id),
            )


def traced_phases(span: Any, hook: PhaseHook) -> PhaseHook:
    """``hook``, also adding an event to ``span`` at each point of the submission."""

    def on_phase(point: PhasePoint) -> None:
        try:
            span.add_event(point)
        except Exception:  # a tracer's failure must not count as the submission's
            logger.debug(
                "adding a span event failed",
                exc_info=True,
                extra=log_fields("observe_failed", step="span_event", point=str(point)),
            )
        hook(point)

    return on_phase


def submission_ended(
    outcome: Outcome, span: Any, transport: str = "smtp", *, http: bool = False
) -> None:
    """A submission by ``transport`` (its name) ended: an SMTP mail transaction, or with
    ``http`` a provider's HTTP request. Count its replies and outcome, note them on its span."""
    try:
        _submission_ended(outcome, span, transport, http)
    except Exception:  # counting must never hurt a delivery
        logger.debug(
            "observing a submission's end failed",
            exc_info=True,
            extra=log_fields("observe_failed", step="submission_ended"),
        )


def _submission_ended(outcome: Outcome, span: Any, transport: str, http: bool) -> None:
    counted = metrics.current()
    if counted is not None:
        if not http:
            for recipient in outcome.recipients:
                counted.smtp_reply(recipient.code, "rcpt")
            if outcome.reply is not None and outcome.phase.name != "RCPT":
                counted.smtp_reply(outcome.reply.code, outcome.phase.name.lower())
        elif outcome.reply is not None:  # the provider's answer
            counted.http_response(transport, outcome.reply.code)
        elif outcome.kind == "unknown":  # the request went out and no answer came
            counted.http_response(transport, None)
        counted.submission(outcome.kind, transport)
    if span is not None:
        span.set_attribute("mailfathom.transport", transport)
        span.set_attribute("mailfathom.submission.outcome", outcome.kind)
        span.set_attribute("mailfathom.submission.phase", outcome.phase.name.lower())
        if outcome.reply is not None and outcome.reply.code is not None:
            code = "http.response.status_code" if http else "smtp.reply.code"
            span.set_attribute(code, outcome.reply.code)
        span.add_event(outcome.kind, {"reason": outcome.reason})

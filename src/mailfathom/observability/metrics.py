"""The counters and histograms this process updates, and the hook that finds them.

Prometheus names (``mailfathom_…_total`` for counters, base units — seconds — in the
name of everything timed) and labels ``kind``, ``queue``, ``outcome``, ``stage``:

==========================================  =========  ==============================
metric                                      type       labels
==========================================  =========  ==============================
``mailfathom_job_attempts_total``           counter    kind, queue, outcome
``mailfathom_job_attempt_duration_seconds`` histogram  kind, queue
``mailfathom_job_start_lag_seconds``        histogram  kind, queue
``mailfathom_smtp_replies_total``           counter    class (2xx…5xx), phase
``mailfathom_email_submissions_total``      counter    outcome
==========================================  =========  ==============================

The start lag is the time from the instant an attempt became due (the enqueue, or
the end of a delay or backoff) to its start, on the injected clock.

Nothing is counted until a :class:`Metrics` is installed (:func:`install`): the
worker and delivery paths call :func:`current` and stop at ``None``, so a process
without metrics pays one global read per attempt.
"""

from __future__ import annotations

import threading
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["Metrics", "current", "install", "uninstall"]

#: Attempt durations and start lags: from a millisecond to ten minutes.
TIME_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)


class Metrics:
    """The process's metrics, in a registry of their own (``registry``) so that two
    instances never collide; :func:`install` makes one the process's current one."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.attempts = Counter(
            "mailfathom_job_attempts",
            "Attempts that ended on this process, by kind, queue and outcome.",
            ["kind", "queue", "outcome"],
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "mailfathom_job_attempt_duration_seconds",
            "How long attempts ran, from their start on this worker to their end.",
            ["kind", "queue"],
            buckets=TIME_BUCKETS,
            registry=self.registry,
        )
        self.start_lag = Histogram(
            "mailfathom_job_start_lag_seconds",
            "From the instant an attempt became due (enqueue, delay or backoff end) to its start.",
            ["kind", "queue"],
            buckets=TIME_BUCKETS,
            registry=self.registry,
        )
        self.smtp_replies = Counter(
            "mailfathom_smtp_replies",
            "SMTP replies read by delivery attempts, by class (2xx, 4xx, 5xx) and phase.",
            ["class", "phase"],
            registry=self.registry,
        )
        self.submissions = Counter(
            "mailfathom_email_submissions",
            "SMTP mail transactions by how they ended (sent, retry, refused, unknown, withdrawn).",
            ["outcome"],
            registry=self.registry,
        )

    def attempt_ended(
        self,
        *,
        kind: str,
        queue: str,
        outcome: str,
        duration: float,
        due_at: datetime,
        started_at: datetime,
    ) -> None:
        """Count one finished attempt (called once per attempt, from any thread)."""
        self.attempts.labels(kind, queue, outcome).inc()
        self.attempt_duration.labels(kind, queue).observe(max(duration, 0.0))
        lag = (started_at - due_at).total_seconds()
        self.start_lag.labels(kind, queue).observe(max(lag, 0.0))

    def smtp_reply(self, code: int | None, phase: str) -> None:
        """Count one SMTP reply; a reply without a code (a lost connection) is ``none``."""
        klass = f"{code // 100}xx" if code is not None and 100 <= code < 600 else "none"
        self.smtp_replies.labels(klass, phase).inc()

    def submission(self, outcome: str) -> None:
        """Count one mail transaction by how it ended."""
        self.submissions.labels(outcome).inc()


_lock = threading.Lock()
_current: Metrics | None = None


def current() -> Metrics | None:
    """The installed metrics, or None when this process counts nothing."""
    return _current


def install(metrics: Metrics | None = None) -> Metrics:
    """Make ``metrics`` (a new one when None) the process's current metrics; returns it."""
    global _current  # noqa: PLW0603 - the one process-wide switch
    with _lock:
        _current = metrics if metrics is not None else Metrics()
        return _current


def uninstall() -> None:
    """Stop counting (the installed metrics keep what they counted)."""
    global _current  # noqa: PLW0603 - the one process-wide switch
    with _lock:
        _current = None

"""The counters and histograms this process updates, and the hook that finds them.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Prometheus names (``mailfathom_…_total`` for counters, base units — seconds — in the
name of everything timed) and labels ``kind``, ``queue``, ``outcome``, ``stage``:

==========================================  =========  ==============================
metric                                      type       labels
==========================================  =========  ==============================
``mailfathom_job_attempts_total``           counter    kind, queue, outcome
``mailfathom_job_attempt_duration_seconds`` histogram  kind, queue
``mailfathom_job_start_lag_seconds``        histogram  kind, queue
``mailfathom_smtp_replies_total``           counter    class (2xx…5xx), phase
``mailfathom_http_responses_total``         counter    transport, class (2xx…5xx)
``mailfathom_email_submissions_total``      counter    transport, outcome
==========================================  =========  ==============================

The start lag is the time from the instant an attempt became due (the enqueue, or
the end of a delay or backoff) to its start, on the injected clock.

Label values are bounded, so that jobs of invented kinds in invented queues cannot
grow a scrape (or the process's memory) without end: an attempt of a kind that is
not one of ``kinds`` (the kinds registered on this worker, which the worker's
``--metrics-port`` passes) is counted under ``kind="(other)"``, and once
``max_queues`` queues have a label of their own, the attempts of any further queue
are counted under ``queue="(other)"`` (names never contain parentheses, so
``(other)`` is no real kind or queue). Without ``kinds``, the first ``max_kinds``
kinds seen get a label of their own, like queues.

Nothing is counted until a :class:`Metrics` is installed (:func:`install`): the
worker and delivery paths call :func:`current` and stop at ``None``, so a process
without metrics pays one global read per attempt.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["MAX_KINDS", "MAX_QUEUES", "OTHER", "Metrics", "current", "install", "uninstall"]

#: Attempt durations and start lags: from a millisecond to ten minutes.
TIME_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)
#: The label value of the kinds not registered here and of the queues past the cap.
OTHER = "(other)"
#: Queues with a label of their own, at most, per process (the first ones seen).
MAX_QUEUES = 50
#: Kinds with a label of their own when the registered kinds are not given.
MAX_KINDS = 100


class Metrics:
    """The process's metrics, in a registry of their own (``registry``) so that two
    instances never collide; :func:`install` makes one the process's current one.

    ``kinds``: the kinds registered on this worker; any other kind is counted as
    ``(other)`` (None: the first ``max_kinds`` kinds seen). ``max_queues``: how many
    queues get a label of their own (the first ones seen; module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        kinds: Iterable[str] | None = None,
        max_kinds: int = MAX_KINDS,
        max_queues: int = MAX_QUEUES,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        # the kinds and queues with a label of their own, and how many more may have one
        self._kinds: set[str] = set(kinds) if kinds is not None else set()
        self._more_kinds = 0 if kinds is not None else max_kinds
        self._queues: set[str] = set()
        self._more_queues = max_queues
        self._attempts = _AttemptStats()
        self.registry.register(self._attempts)
        # the collector's own lock and table, for attempt_ended to update inline
        self._lock, self._series = self._attempts.lock, self._attempts.series
        self.smtp_replies = Counter(
            "mailfathom_smtp_replies",
            "SMTP replies read by delivery attempts, by class (2xx, 4xx, 5xx) and phase.",
            ["class", "phase"],
            registry=self.registry,
        )
        self.http_responses = Counter(
            "mailfathom_http_responses",
            "Answers of email providers' HTTP APIs by transport and class (2xx, 4xx, 5xx; "
            "none: the request went out and no answer came).",
            ["transport", "class"],
            registry=self.registry,
        )
        self.submissions = Counter(
            "mailfathom_email_submissions",
            "Submissions (SMTP mail transactions, provider requests) by transport and how "
            "they ended (sent, retry, refused, unknown, withdrawn).",
            ["transport", "outcome"],
            registry=self.registry,
        )

    def attempt_ended(  # noqa: PLR0917 - positional: the hot path's cheapest call
        self,
        kind: str,
        queue: str,
        outcome: str,
        duration: float,
        due_at: datetime,
        started_at: datetime,
    ) -> None:
        """Count one finished attempt (called once per attempt, from any thread).

        On the hot path: the hook calls it with positional arguments, and it updates the
        collector's table inline (one lock, one look-up, two bisections, no further call).
        """
        lag = (started_at - due_at).total_seconds()
        if lag < 0.0:  # noqa: PLR1730 - a comparison costs less than a call of max()
            lag = 0.0
        if duration < 0.0:  # noqa: PLR1730
            duration = 0.0
        with self._lock:
            if kind not in self._kinds:
                if self._more_kinds > 0:
                    self._more_kinds -= 1
                    self._kinds.add(kind)
                else:
                    kind = OTHER
            if queue not in self._queues:
                if self._more_queues > 0:
                    self._more_queues -= 1
                    self._queues.add(queue)
                else:
                    queue = OTHER
            key = (kind, queue)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Series()
            outcomes = series.outcomes
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            series.durations[bisect_left(TIME_BUCKETS, duration)] += 1
            series.duration_sum += duration
            series.lags[bisect_left(TIME_BUCKETS, lag)] += 1
            series.lag_sum += lag

    def smtp_reply(self, code: int | None, phase: str) -> None:
        """Count one SMTP reply; a reply without a code (a lost connection) is ``none``."""
        klass = f"{code // 100}xx" if code is not None and 100 <= code < 600 else "none"
        self.smtp_replies.labels(klass, phase).inc()

    def http_response(self, transport: str, code: int | None) -> None:
        """Count one provider's HTTP answer; None (no answer to a request sent) is ``none``."""
        klass = f"{code // 100}xx" if code is not None and 100 <= code < 600 else "none"
        self.http_responses.labels(transport, klass).inc()

    def submission(self, outcome: str, transport: str = "smtp") -> None:
        """Count one submission (by ``transport``, the transport's name) by how it ended."""
        self.submissions.labels(transport, outcome).inc()


class _Series:
    """One (kind, queue)'s attempts: counts by outcome, and two histograms (per-bucket
    counts, not cumulative; the last bucket is +Inf)."""

    __slots__ = ("duration_sum", "durations", "lag_sum", "lags", "outcomes")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.durations = [0] * (len(TIME_BUCKETS) + 1)
        self.lags = [0] * (len(TIME_BUCKETS) + 1)
        self.duration_sum = 0.0
        self.lag_sum = 0.0


class _AttemptStats(Collector):
    """The attempt counter and histograms, kept as plain numbers under one lock.

    prometheus_client's own Counter and Histogram take a lock per value (a histogram
    observation takes two) and a labelled look-up each; an attempt here takes one lock,
    a dictionary look-up and two bisections, and the families are built at scrape time.
    """

    def __init__(self) -> None:
        #: Held while a series changes (Metrics.attempt_ended) or is read (collect).
        self.lock = threading.Lock()
        self.series: dict[tuple[str, str], _Series] = {}

    def collect(self) -> Iterator[Metric]:
        """The counter and the two histograms, as they are now."""
        with self.lock:
            rows = [
                (kind, queue, dict(s.outcomes), list(s.durations), s.duration_sum,
                 list(s.lags), s.lag_sum)
                for (kind, queue), s in sorted(self.series.items())
            ]  # fmt: skip
        attempts = CounterMetricFamily(
            "mailfathom_job_attempts",
            "Attempts that ended on this process, by kind, queue and outcome.",
            labels=["kind", "queue", "outcome"],
        )
        durations = HistogramMetricFamily(
            "mailfathom_job_attempt_duration_seconds",
            "How long attempts ran, from their start on this worker to their end.",
            labels=["kind", "queue"],
        )
        lags = HistogramMetricFamily(
            "mailfathom_job_start_lag_seconds",
            "From the instant an attempt became due (enqueue, delay or backoff end) to its start.",
            labels=["kind", "queue"],
        )
        for kind, queue, outcomes, duration_counts, duration_sum, lag_counts, lag_sum in rows:
            for outcome, count in sorted(outcomes.items()):
                attempts.add_metric([kind, queue, outcome], count)
            durations.add_metric([kind, queue], _cumulative(duration_counts), duration_sum)
            lags.add_metric([kind, queue], _cumulative(lag_counts), lag_sum)
        yield attempts
        yield durations
        yield lags


_BOUNDS = [*(repr(float(bound)) for bound in TIME_BUCKETS), "+Inf"]  # as Go prints them


def _cumulative(counts: list[int]) -> list[tuple[str, float]]:
    total = 0
    buckets: list[tuple[str, float]] = []
    for bound, count in zip(_BOUNDS, counts, strict=True):
        total += count
        buckets.append((bound, total))
    return buckets


_lock = threading.Lock()
_current: Metrics | None = None


def current() -> Metrics | None:
    """The installed metrics, or None when this process counts nothing."""
    return _current


def install(metrics: Metrics | None = None, *, kinds: Iterable[str] | None = None) -> Metrics:
    """Make ``metrics`` (a new one, labelling the registered ``kinds``, when None) the
    process's current metrics; returns it."""
    global _current  # noqa: PLW0603 - the one process-wide switch
    with _lock:
        _current = metrics if metrics is not None else Metrics(kinds=kinds)
        return _current


def uninstall() -> None:
    """Stop counting (the installed metrics keep what they counted)."""
    global _current  # noqa: PLW0603 - the one process-wide switch
    with _lock:
        _current = None

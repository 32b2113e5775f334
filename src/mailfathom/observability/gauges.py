"""Gauges read from the database, cached: one read per ``min_interval`` at most.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

However often Prometheus scrapes (and however many scrapers there are), the
collector reads the database at most once per ``min_interval`` seconds (default
10) and serves the cached numbers in between, so a scrape never queues behind
another's queries. When the read fails, the last numbers are served and
``mailfathom_metrics_database_up`` is 0.

Succeeded and Dropped jobs are counted apart: those rows only accumulate (950,000
of a 1,000,000-row table in the benchmark), and counting them reads every one, so
they are recounted at most once per ``history_interval`` seconds (default 300), in a
thread of their own: a scrape never waits for that count (the first one excepted,
which counts inline so that a fresh process serves every state). Their numbers are
exact as of that count, up to ``history_interval`` old;
``mailfathom_metrics_history_age_seconds`` says how old.

Neither read may keep the database busy for more than ``max_duty`` of the time
(default 2 %): after a read that took ``t`` seconds the next waits at least
``t / max_duty`` seconds, so on a table big enough to make a read slow the reads
space themselves out instead of adding load (a 400 ms read: one every 20 s at most).

==============================================  =========  ===============
metric                                          type       labels
==============================================  =========  ===============
``mailfathom_jobs``                             gauge      state, queue (*)
``mailfathom_metrics_history_age_seconds``      gauge      —
``mailfathom_oldest_due_job_age_seconds``       gauge      queue
``mailfathom_lease_expiries_total``             counter    queue
``mailfathom_workers_alive``                    gauge      —
``mailfathom_jobs_unhandled``                   gauge      kind (**)
``mailfathom_emails``                           gauge      stage
``mailfathom_emails_unknown_outcome``           gauge      —
``mailfathom_suppressed_addresses``              gauge      reason
``mailfathom_soft_bounces_total``               counter    —
``mailfathom_metrics_database_up``              gauge      —
``mailfathom_metrics_database_read_seconds``    gauge      —
==============================================  =========  ===============

(*) Pending, Claimed and DeadLettered as of the last read; Succeeded and Dropped as
of the last recount (above).

(**) Due jobs of kinds no live worker handles (present only while some are), at most
``UNHANDLED_KINDS`` kinds with a label of their own (the most jobs first), the rest
under ``kind="(other)"``: anyone who may enqueue can invent kinds.

These are the database's numbers, the same from every process that serves them:
aggregate them with ``max`` across instances, not ``sum``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mailfathom.clock import Clock
from mailfathom.errors import StoreError
from mailfathom.observability.logs import log_fields
from mailfathom.store.console.reads import Snapshot
from mailfathom.store.sql_store import SqlStore
from mailfathom.testsignal import TestSignal

__all__ = ["UNHANDLED_KINDS", "DatabaseGauges"]

logger = logging.getLogger(__name__)

# The labels are the stored values of mailfathom.jobs.state.JobState and
# mailfathom.delivery.stage.OutgoingEmailStage, written out so that observability imports
# neither layer above it (tests/test_layers.py checks that they match).

#: The states counted per queue at every read: what waits, what runs, what needs an
#: operator (cheap: ranges of the state index).
_STATES = ["Pending", "Claimed", "DeadLettered"]
#: The states recounted every ``history_interval``: their rows only accumulate.
_HISTORY = ["Succeeded", "Dropped"]
#: Every stage of an outgoing email.
_STAGES = ["Recorded", "TransmissionBegun", "Sent", "Refused", "Cancelled"]
#: Every reason an address is suppressed (mailfathom.delivery.suppressions).
_SUPPRESSION_REASONS = ["hard_bounce", "complaint", "manual"]


class DatabaseGauges(Collector):
    """A Prometheus collector of the database's numbers (see the module docstring)."""

    def __init__(
        self,
        store: SqlStore,
        clock: Clock,
        *,
        min_interval: float = 10.0,
        history_interval: float = 300.0,
        max_duty: float | None = 0.02,
    ) -> None:
        self._store = store
        self._clock = clock
        self.min_interval = float(min_interval)
        self.history_interval = float(history_interval)
        #: The share of the time reads may take (None: no limit beyond the intervals).
        self.max_duty = max_duty
        self._next_read = float("-inf")  # monotonic instant the next read is due
        self._next_recount = float("-inf")
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._suppressed: dict[str, int] | None = None
        self._events: dict[str, int] | None = None
        self._up = 0
        self._took = 0.0
        self._history: dict[tuple[str, str], int] | None = None
        self._counted_at = float("-inf")  # ... and the last one that worked
        self._counting = False
        #: How many times the database was read, and the history recounted (tests and
        #: the bench look at them).
        self.reads = 0
        self.recounts = 0
        #: Signalled with the counts at the end of each recount that worked (tests).
        self.recounted: TestSignal[dict[tuple[str, str], int]] = TestSignal("recounted")

    def collect(self) -> Iterator[Metric]:
        """The cached numbers, read again first when the next read is due."""
        with self._lock:
            if time.monotonic() >= self._next_read:
                self._refresh()
            self._recount_when_due()
            snapshot, up, took = self._snapshot, self._up, self._took
            suppressed, events = self._suppressed, self._events
            history, counted_at = self._history, self._counted_at
        yield _gauge("mailfathom_metrics_database_up", "1 when the last read worked.", up)
        yield _gauge(
            "mailfathom_metrics_database_read_seconds",
            "How long the last read of the database gauges took.",
            took,
        )
        if history is not None:
            yield _gauge(
                "mailfathom_metrics_history_age_seconds",
                "How old the Succeeded and Dropped counts of mailfathom_jobs are.",
                time.monotonic() - counted_at,
            )
        if snapshot is not None:
            yield from _families(snapshot, history)
        if suppressed is not None:
            family = GaugeMetricFamily(
                "mailfathom_suppressed_addresses",
                "Addresses on the suppression list (never sent to), by reason.",
                labels=["reason"],
            )
            for reason in _SUPPRESSION_REASONS:
                family.add_metric([reason], suppressed.get(reason, 0))
            yield family
        if events is not None:
            soft = CounterMetricFamily(
                "mailfathom_soft_bounces",
                "Soft bounces recorded (4.x.x DSNs, webhook soft bounces): kept as suppression "
                "events, never suppressing an address.",
            )
            soft.add_metric([], events.get("soft_bounce", 0))
            yield soft

    def _recount_when_due(self) -> None:
        """Under the lock: start a recount of the history when it is due (inline the
        first time, so a fresh process serves every state; in a thread after that)."""
        began = time.monotonic()
        if self._counting or began < self._next_recount:
            return
        self._next_recount = began + self.history_interval
        self._counting = True
        if self._history is None:
            self._recount(locked=True)
            return
        threading.Thread(
            target=self._recount, name="mailfathom-metrics-history", daemon=True
        ).start()

    def _recount(self, *, locked: bool = False) -> None:
        began = time.monotonic()
        counts: dict[tuple[str, str], int] | None = None
        try:
            counts = self._store.console.history()
        except Exception as exc:  # in a thread of its own: say so, and count again later
            logger.warning(
                "recounting Succeeded and Dropped jobs failed (%s): serving the last counts",
                exc,
                exc_info=not isinstance(exc, StoreError),
                extra=log_fields("metrics_recount_failed", error=str(exc)),
            )
        if not locked:
            self._lock.acquire()
        try:
            self.recounts += 1
            self._counting = False
            spacing = self._spacing(time.monotonic() - began)
            self._next_recount = max(self._next_recount, began + spacing)
            if counts is not None:
                self._history, self._counted_at = counts, time.monotonic()
        finally:
            if not locked:
                self._lock.release()
        if counts is not None:
            self.recounted.signal(counts)

    def _spacing(self, took: float) -> float:
        return took / self.max_duty if self.max_duty else 0.0

    def _refresh(self) -> None:
        began = time.monotonic()
        self.reads += 1
        try:
            self._snapshot = self._store.console.snapshot(self._clock.now())
            self._suppressed = self._store.suppressions.counts()
            self._events = self._store.suppressions.event_counts()
        except StoreError as exc:
            self._up = 0
            logger.warning(
                "reading the database gauges failed (%s): serving the last numbers",
                exc,
                extra=log_fields("metrics_read_failed", error=str(exc)),
            )
        else:
            self._up = 1
        self._took = time.monotonic() - began
        self._next_read = began + max(self.min_interval, self._spacing(self._took))


#: Kinds with a label of their own in ``mailfathom_jobs_unhandled``; the others are
#: summed under ``(other)`` (real kind names never contain parentheses).
UNHANDLED_KINDS = 20


def _bounded(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The ``UNHANDLED_KINDS`` kinds with the most jobs, then ``(other)`` for the rest."""
    most = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kept = most[:UNHANDLED_KINDS]
    rest = sum(count for _, count in most[UNHANDLED_KINDS:])
    return [*kept, ("(other)", rest)] if rest else kept


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _families(snapshot: Snapshot, history: dict[tuple[str, str], int] | None) -> Iterable[Metric]:
    jobs = GaugeMetricFamily(
        "mailfathom_jobs",
        "Jobs by state and queue (a queue with none is absent); Succeeded and Dropped as "
        "of their last recount (mailfathom_metrics_history_age_seconds).",
        labels=["state", "queue"],
    )
    queues = sorted({queue for _, queue in snapshot.jobs})
    counted = sorted(set(queues) | {queue for _, queue in history or {}})
    for queue in counted:
        for state in _STATES:
            jobs.add_metric([state, queue], snapshot.jobs.get((state, queue), 0))
        if history is not None:
            for state in _HISTORY:
                jobs.add_metric([state, queue], history.get((state, queue), 0))
    yield jobs
    oldest = GaugeMetricFamily(
        "mailfathom_oldest_due_job_age_seconds",
        "Per queue, how long the job due longest has waited to be claimed (0: none due).",
        labels=["queue"],
    )
    for queue in sorted(set(queues) | set(snapshot.oldest_due)):
        due = snapshot.oldest_due.get(queue)
        age = (snapshot.now - due).total_seconds() if due is not None else 0.0
        oldest.add_metric([queue], max(age, 0.0))
    yield oldest
    expiries = CounterMetricFamily(
        "mailfathom_lease_expiries",
        "Attempts lost to an expired lease (the worker vanished), from the attempt history.",
        labels=["queue"],
    )
    for queue in sorted(set(queues) | set(snapshot.lease_expiries)):
        expiries.add_metric([queue], snapshot.lease_expiries.get(queue, 0))
    yield expiries
    yield _gauge(
        "mailfathom_workers_alive",
        "Registered workers whose heartbeat is within their lease.",
        snapshot.workers_alive,
    )
    unhandled = GaugeMetricFamily(
        "mailfathom_jobs_unhandled",
        "Due jobs (Pending, not held) of a kind no live worker handles: they wait, no "
        "attempt spent (nothing while no worker is alive).",
        labels=["kind"],
    )
    for kind, count in _bounded(snapshot.unhandled):
        unhandled.add_metric([kind], count)
    yield unhandled
    emails = GaugeMetricFamily("mailfathom_emails", "Outgoing emails by stage.", labels=["stage"])
    for stage in _STAGES:
        emails.add_metric([stage], snapshot.emails.get(stage, 0))
    yield emails
    yield _gauge(
        "mailfathom_emails_unknown_outcome",
        "Emails whose outcome is unknown (TransmissionBegun, no live delivery): an operator "
        "must resolve them.",
        snapshot.unknown_outcomes,
    )

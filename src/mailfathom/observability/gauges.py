"""Gauges read from the database, cached: one read per ``min_interval`` at most.

However often Prometheus scrapes (and however many scrapers there are), the
collector reads the database at most once per ``min_interval`` seconds (default
10) and serves the cached numbers in between, so a scrape never queues behind
another's queries. When the read fails, the last numbers are served and
``mailfathom_metrics_database_up`` is 0.

==============================================  =========  ===============
metric                                          type       labels
==============================================  =========  ===============
``mailfathom_jobs``                             gauge      state, queue (*)
``mailfathom_oldest_due_job_age_seconds``       gauge      queue
``mailfathom_lease_expiries_total``             counter    queue
``mailfathom_workers_alive``                    gauge      —
``mailfathom_emails``                           gauge      stage
``mailfathom_emails_unknown_outcome``           gauge      —
``mailfathom_metrics_database_up``              gauge      —
``mailfathom_metrics_database_read_seconds``    gauge      —
==============================================  =========  ===============

(*) Pending, Claimed and DeadLettered only: see ``_STATES``.

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
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import StoreError
from mailfathom.jobs.state import JobState
from mailfathom.observability.logs import log_fields
from mailfathom.store.metrics_store import Snapshot, read_snapshot
from mailfathom.store.sql_store import SqlStore

__all__ = ["DatabaseGauges"]

logger = logging.getLogger(__name__)

#: The states counted per queue: what waits, what runs, what needs an operator. Succeeded
#: and Dropped rows only accumulate (counting them is the one read that grows with
#: history); their rate is ``mailfathom_job_attempts_total``'s.
_STATES = [JobState.PENDING.value, JobState.CLAIMED.value, JobState.DEAD_LETTERED.value]
_STAGES = [stage.value for stage in OutgoingEmailStage]


class DatabaseGauges(Collector):
    """A Prometheus collector of the database's numbers (see the module docstring)."""

    def __init__(self, store: SqlStore, clock: Clock, *, min_interval: float = 10.0) -> None:
        self._store = store
        self._clock = clock
        self.min_interval = float(min_interval)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._read_at = float("-inf")  # monotonic instant of the last read attempt
        self._up = 0
        self._took = 0.0
        #: How many times the database was read (tests and the bench look at it).
        self.reads = 0

    def collect(self) -> Iterator[Metric]:
        """The cached numbers, read again first when older than ``min_interval``."""
        with self._lock:
            if time.monotonic() - self._read_at >= self.min_interval:
                self._refresh()
            snapshot, up, took = self._snapshot, self._up, self._took
        yield _gauge("mailfathom_metrics_database_up", "1 when the last read worked.", up)
        yield _gauge(
            "mailfathom_metrics_database_read_seconds",
            "How long the last read of the database gauges took.",
            took,
        )
        if snapshot is not None:
            yield from _families(snapshot)

    def _refresh(self) -> None:
        began = time.monotonic()
        self._read_at = began
        self.reads += 1
        try:
            self._snapshot = read_snapshot(self._store, self._clock.now())
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


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _families(snapshot: Snapshot) -> Iterable[Metric]:
    jobs = GaugeMetricFamily(
        "mailfathom_jobs",
        "Pending, Claimed and DeadLettered jobs by queue (a queue with none is absent).",
        labels=["state", "queue"],
    )
    queues = sorted({queue for _, queue in snapshot.jobs})
    for queue in queues:
        for state in _STATES:
            jobs.add_metric([state, queue], snapshot.jobs.get((state, queue), 0))
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

"""The worker's heartbeat: renews the leases of the jobs it holds and says it is alive.

Internal. A thread of its own, so a long handler, a slow claim or a busy main
loop never delays a renewal: every ``interval`` (a third of the lease) one
transaction extends every lease the worker holds — running jobs and finished
ones whose outcome is not recorded yet — and a second one refreshes its registry
row. A job that runs five times longer than the lease is therefore never claimed
by another worker. When the database fails the heartbeat logs it and tries again
sooner; leases that expire meanwhile are reported as lost once it is back.

Clocks stepped backwards: a renewal never shortens a lease (the store keeps the
later of the stored and the new expiry), and the registry row is never dated
before the worker's start, so the database's CHECK cannot refuse a beat.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from mailfathom.clock import Clock
from mailfathom.errors import StoreError
from mailfathom.jobs.model import Job
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import WorkerRegistration
from mailfathom.store.protocol import Store

__all__ = ["Heartbeat"]

logger = logging.getLogger(__name__)


class Heartbeat:
    """Beats every ``interval`` seconds on its own thread until :meth:`stop`."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        registration: WorkerRegistration,
        *,
        lease: timedelta,
        held: Callable[[], Sequence[Job]],
        on_lost: Callable[[set[tuple[int, int]]], None],
        on_abort: Callable[[dict[int, str]], None] | None = None,
        interval: float | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._registration = registration
        self._lease = lease
        self._held = held
        self._on_lost = on_lost
        self._on_abort = on_abort
        self.interval = interval if interval is not None else lease.total_seconds() / 3
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def beat(self) -> None:
        """One heartbeat now: renew the leases (reporting the lost ones and the operators'
        abort requests, learnt in the same statement), then refresh the registry row.
        Raises :class:`StoreError` when the database fails; a registry failure is raised
        only after the leases were renewed, so it never costs a lease.
        """
        jobs = list(self._held())
        now = self._clock.now()
        held = [(job.id, job.attempts) for job in jobs]
        if held:
            still, aborts = self._store.claims.renew_leases(
                owner=self._registration.id, held=held, lease_until=now + self._lease
            )
            lost = {(job.id, job.attempts) for job in jobs if job.id not in still}
            if lost:
                self._on_lost(lost)
            if aborts and self._on_abort is not None:
                self._on_abort(aborts)
        self._store.workers.heartbeat(self._registration, now=now)

    def start(self) -> None:
        """Start beating on a daemon thread."""
        self._thread = threading.Thread(
            target=self._run, name=f"mailfathom-heartbeat-{self._registration.id}", daemon=True
        )
        self._thread.start()

    def stop(self, *, wait: bool = True) -> None:
        """Stop beating; with ``wait``, let a beat in progress finish (briefly)."""
        self._stopped.set()
        if wait and self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        wait = self.interval
        while not self._stopped.wait(wait):
            try:
                self.beat()
            except StoreError as exc:
                logger.warning(
                    "heartbeat failed (%s); retrying in %.1f s: leases expire %s s after the "
                    "last successful one",
                    exc,
                    min(self.interval, 1.0),
                    self._lease.total_seconds(),
                    extra=log_fields(
                        "heartbeat_failed",
                        error=str(exc),
                        retry_in=min(self.interval, 1.0),
                        lease=self._lease.total_seconds(),
                    ),
                )
                self._failing = True
                wait = min(self.interval, 1.0)
                continue
            if self._failing:
                logger.info(
                    "heartbeat recovered: the database answers again",
                    extra=log_fields("heartbeat_recovered"),
                )
                self._failing = False
            wait = self.interval

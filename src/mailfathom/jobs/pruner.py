"""The pruner: compacts (or, by opt-in, deletes) terminal rows past their retention.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

One pass walks every rule of the :class:`~mailfathom.retention.RetentionPolicy` —
terminal jobs per state and kind, final emails per stage, audit events — in small
batches, one short transaction each, so claims never stall behind it. One pass at a
time runs across the fleet: it holds the ``mf_pruner`` lease (and, on PostgreSQL,
every batch holds an advisory lock). On SQLite the pages it frees go back to the file
system afterwards (``PRAGMA incremental_vacuum``), a few thousand at a time.

``mf.prune(dry_run=)`` runs one pass now; a worker runs one every ``prune_interval``
seconds of its clock on a thread of its own (:class:`PeriodicPruner`), never in its
claim path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mailfathom.clock import Clock
from mailfathom.errors import StoreError
from mailfathom.observability.logs import log_fields
from mailfathom.retention import EMAIL_STAGES, JOB_STATES, RetentionPolicy
from mailfathom.store.retention.repository import Batch, RetentionStore
from mailfathom.testsignal import TestSignal

__all__ = [
    "WORKER_DUTY",
    "WORKER_IDLE_DUTY",
    "PeriodicPruner",
    "PruneReport",
    "Pruner",
    "describe_pass",
]

logger = logging.getLogger(__name__)

#: How long a pass's lease lasts without renewal (renewed at every batch past half of it).
PRUNE_LEASE = timedelta(seconds=60)
#: Free pages SQLite keeps for reuse after a pass, and the most handed back per step (a
#: step holds the writer lock: 256 pages take 10-20 ms; the pass rests between steps as
#: between batches).
_KEEP_PAGES = 256
_RECLAIM_STEP = 256

#: The share of its time a worker's pruning thread spends inside batches while due jobs
#: wait to be claimed (see Pruner.duty): claimers first. Measured in bench/retention.py:
#: at 0.25 a SQLite claimer lost 18-20 % of its throughput (one writer at a time), at
#: 0.1 it stays within a budget of 20 %.
WORKER_DUTY = 0.1
#: ... and while nothing is due: a quiet queue lets the pruner catch up.
WORKER_IDLE_DUTY = 0.5

#: Called after each batch with (table, state, action, rows).
Progress = Callable[[str, str, str, int], None]


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What one pass did (or, with ``dry_run``, would do).

    ``rows[table][state][action]`` counts rows: tables ``jobs``, ``emails``,
    ``job_events``, ``email_events``; actions ``compacted`` and ``deleted`` (and
    ``expired``: Recorded emails past their expiry, settled as Refused). ``ran`` is
    False when another pruner held the lease, so this pass did nothing.
    """

    dry_run: bool
    ran: bool
    started_at: datetime
    finished_at: datetime
    rows: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    #: SQLite pages handed back to the file system after the pass.
    pages_reclaimed: int = 0

    @property
    def total(self) -> int:
        """Rows compacted, deleted or expired in all."""
        return sum(
            n for states in self.rows.values() for acts in states.values() for n in acts.values()
        )

    def to_json(self) -> dict[str, Any]:
        """As plain JSON values (kept in ``mf_pruner`` for the console)."""
        return {
            "dry_run": self.dry_run,
            "ran": self.ran,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "rows": self.rows,
            "pages_reclaimed": self.pages_reclaimed,
        }


class Pruner:
    """Runs pruning passes for one policy on one database."""

    def __init__(
        self,
        store: RetentionStore,
        clock: Clock,
        policy: RetentionPolicy,
        *,
        batch_size: int = 100,
        duty: float = 1.0,
        idle_duty: float | None = None,
        holder: str | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self.policy = policy
        self.batch_size = batch_size
        if not 0 < duty <= 1:
            raise ValueError(f"duty must be in (0, 1], not {duty!r}")
        #: The share of time the pass may spend inside its batches: after a batch that took
        #: t seconds it rests t * (1 / duty - 1), so claims (SQLite has one writer at a
        #: time) always find the database free most of the time. 1: no rest.
        self.duty = duty
        if idle_duty is not None and not 0 < idle_duty <= 1:
            raise ValueError(f"idle_duty must be in (0, 1], not {idle_duty!r}")
        #: The duty while no due job waits to be claimed (None: ``duty`` all along). Each
        #: rest looks again, so the pruner slows down as soon as claimers have work.
        self.idle_duty = idle_duty
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def batches(self, now: datetime) -> Iterator[Batch]:
        """Every kind of work a pass does at ``now``: Recorded emails past their expiry are
        settled (Refused, "expired": whatever the policy, so that no read shows one as
        Recorded for longer than a pass interval even when no delivery runs), then what
        the policy asks for: audit events first, then jobs and emails.

        An audit event is never deleted on its own: what an operator did to a row is a
        fact kept as long as the row, and goes only with a row deleted by opt-in. Past
        the audit period an event is compacted (its reason cut to one line). Events go
        before jobs and emails so that a pass compacts exactly the events a dry run
        counts: had a keyless row been deleted first, its events would have vanished
        from that count."""
        yield Batch("emails", "expire", "Recorded", now)
        if self.policy.audit is not None:
            for table in ("job_events", "email_events"):
                yield Batch(table, "compact", "all", now - self.policy.audit)
        deleting = self.policy.delete_keyless
        for table, names, rules, kinds in (
            ("jobs", JOB_STATES, self.policy.jobs, self.policy.kinds),
            ("emails", EMAIL_STAGES, self.policy.emails, {}),
        ):
            for state in names:
                own = sorted(kind for kind, r in kinds.items() if state in r)
                targets: list[tuple[str | None, timedelta | None]] = [(None, rules.get(state))]
                targets += [(kind, kinds[kind][state]) for kind in own]
                for kind, period in targets:
                    if period is None:
                        continue
                    common: dict[str, Any] = {
                        "table": table,
                        "state": state,
                        "cutoff": now - period,
                        "kind": kind,
                        "except_kinds": tuple(own) if kind is None else (),
                    }
                    if deleting:
                        yield Batch(action="delete", only="keyless", **common)
                        yield Batch(action="compact", only="keyed", **common)
                    else:
                        yield Batch(action="compact", **common)

    def run(
        self,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> PruneReport:
        """One pass: compact or delete what the policy says (``dry_run``: only count it).

        ``cancel`` set ends the pass after the batch in hand (the rest waits for the next)."""
        started = self._clock.now()
        rows: dict[str, dict[str, dict[str, int]]] = {}
        if dry_run:
            for batch in self.batches(started):
                _add(rows, batch, self._store.count(batch))
            return PruneReport(True, True, started, self._clock.now(), rows)
        if not self._store.acquire(self.holder, now=started, lease=PRUNE_LEASE):
            logger.debug(
                "pruner=%s: another pruner holds the lease",
                self.holder,
                extra=log_fields("prune_skipped", pruner=self.holder),
            )
            return PruneReport(False, False, started, started, rows)
        renew_at = started + PRUNE_LEASE / 2
        busy = False  # another pruner's batch holds the advisory lock: leave the rest
        try:
            for batch in self.batches(started):
                _add(rows, batch, 0)
                if busy:
                    continue
                while cancel is None or not cancel.is_set():
                    now = self._clock.now()
                    if now >= renew_at:
                        if not self._store.renew(self.holder, now=now, lease=PRUNE_LEASE):
                            raise StoreError("the pruner lease was lost: another pruner took over")
                        renew_at = now + PRUNE_LEASE / 2
                    began = time.monotonic()
                    done = self._store.run(batch, limit=self.batch_size, now=now)
                    took = time.monotonic() - began
                    if done is None:  # another pruner is inside a batch (PostgreSQL)
                        busy = True
                        break
                    _add(rows, batch, done)
                    if progress is not None and done:
                        progress(batch.table, batch.state, _past(batch.action), done)
                    if done < self.batch_size:
                        break
                    self._rest(took, cancel)
            reclaimed = self._reclaim(cancel)
            report = PruneReport(False, True, started, self._clock.now(), rows, reclaimed)
        except BaseException:
            with contextlib.suppress(StoreError):  # the database may be what failed
                self._store.finish(
                    self.holder, now=self._clock.now(), report=_failed(started, rows)
                )
            raise
        self._store.finish(self.holder, now=report.finished_at, report=report.to_json())
        if report.total:
            logger.info(
                "pruner=%s: %d row(s) pruned, %d page(s) reclaimed",
                self.holder,
                report.total,
                reclaimed,
                extra=log_fields(
                    "prune", pruner=self.holder, pruned=report.total, reclaimed=reclaimed, rows=rows
                ),
            )
        return report

    def duty_now(self) -> float:
        """The duty cycle in force: ``duty`` while a due job waits to be claimed (the
        claimers have work), ``idle_duty`` while none does."""
        if self.idle_duty is None or self.idle_duty == self.duty:
            return self.duty
        return self.duty if self._store.claims_waiting(self._clock.now()) else self.idle_duty

    def _rest(self, took: float, cancel: threading.Event | None) -> None:
        """After a step that took ``took`` seconds, rest as the duty cycle says (the
        busy one while due jobs wait for claimers; cut short when ``cancel`` is set)."""
        duty = self.duty_now()
        if duty < 1:
            rest = took * (1 / duty - 1)
            if cancel is None:
                time.sleep(rest)
            else:
                cancel.wait(rest)

    def _reclaim(self, cancel: threading.Event | None = None) -> int:
        """SQLite: hand free pages beyond a small reserve back, a step at a time, resting
        between steps as between batches."""
        reclaimed = 0
        while cancel is None or not cancel.is_set():
            free = self._store.reclaim(0)
            step = min(free - _KEEP_PAGES, _RECLAIM_STEP)
            if step <= 0:
                return reclaimed
            began = time.monotonic()
            self._store.reclaim(step)
            took = time.monotonic() - began
            after = self._store.reclaim(0)
            if after >= free:  # not an incremental file: the pages stay for reuse
                return reclaimed
            reclaimed += free - after
            self._rest(took, cancel)
        return reclaimed


def describe_pass(report: dict[str, Any] | None) -> str:
    """A stored pass report in words: "3 jobs Succeeded compacted, 1 job events deleted"."""
    if not report:
        return "nothing yet"
    parts = [
        f"{n:,} {table.replace('_', ' ')}{'' if state == 'all' else ' ' + state} {action}"
        for table, states in report.get("rows", {}).items()
        for state, actions in states.items()
        for action, n in actions.items()
        if n
    ]
    said = ", ".join(parts) or "nothing was old enough"
    return said + (
        " (the pass failed part way: see the worker's log)" if report.get("failed") else ""
    )


def _add(rows: dict[str, dict[str, dict[str, int]]], batch: Batch, n: int) -> None:
    acts = rows.setdefault(batch.table, {}).setdefault(batch.state, {})
    acts[_past(batch.action)] = acts.get(_past(batch.action), 0) + n


def _past(action: str) -> str:
    return {"compact": "compacted", "delete": "deleted", "expire": "expired"}[action]


def _failed(started: datetime, rows: dict[str, dict[str, dict[str, int]]]) -> dict[str, Any]:
    return {
        "dry_run": False,
        "ran": True,
        "failed": True,
        "started_at": started.isoformat(),
        "rows": rows,
    }


class PeriodicPruner:
    """A worker's pruning thread: a pass every ``interval`` of the injected clock.

    It checks the clock every ``tick`` real seconds (a FakeClock moved forward is seen
    at the next tick). A failed pass is logged and tried again after ``interval``.
    """

    def __init__(self, pruner: Pruner, clock: Clock, *, interval: float, tick: float = 1.0) -> None:
        self.pruner = pruner
        self._clock = clock
        self.interval = timedelta(seconds=interval)
        self.tick = min(tick, interval)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Test signals: the thread started (with the instant of its first pass), and
        #: each pass's report (or the StoreError it failed with).
        self.started: TestSignal[datetime] = TestSignal("pruner.started")
        self.passes: TestSignal[PruneReport | StoreError] = TestSignal("pruner.passes")

    def start(self) -> None:
        """Start the thread. The first pass comes one interval later: a fleet that
        (re)starts does not prune all at once while it is busiest."""
        self._next = self._clock.now() + self.interval
        self.started.signal(self._next)
        self._thread = threading.Thread(target=self._loop, name="mailfathom-pruner", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stop after the current batch; ``wait`` for the thread to end."""
        self._stop.set()
        if wait and self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.tick):
            if self._clock.now() < self._next:
                continue
            try:
                report: PruneReport | StoreError = self.pruner.run(cancel=self._stop)
            except StoreError as exc:
                logger.warning(
                    "pruner=%s: pass failed (%s); trying again later",
                    self.pruner.holder,
                    exc,
                    extra=log_fields("prune_failed", pruner=self.pruner.holder, error=str(exc)),
                )
                report = exc
            self._next = self._clock.now() + self.interval
            self.passes.signal(report)

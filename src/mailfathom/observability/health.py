"""Health checks for liveness and readiness probes: ``mailfathom health`` and ``/healthz``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

The checks, each passed or failed with a sentence saying why:

- ``database``: the database answers a statement;
- ``migrations``: every migration this code knows is applied, and no newer one;
- ``kinds``: names the due jobs of kinds no live worker handles (see
  :meth:`~mailfathom.store.console.reads.ConsoleReads.unhandled_kinds`); it passes
  either way, since a rolling deploy goes through that state (alert on the gauge);
- ``heartbeat`` (only for a given worker id): that worker is registered and its last
  heartbeat is within its lease (plus the clock-skew margin), so its jobs are safe;
- ``smtp`` (only when an SMTP server is configured): the server takes this client as
  configured. It fails on a configuration error (a refused password, credentials and
  no STARTTLS or AUTH to give them to, "authentication required"), saying what to fix;
  an unreachable server passes with a note, since delivery rides out an outage.
  ``mailfathom health`` tries the server itself (connect, EHLO, STARTTLS, AUTH,
  ``MAIL FROM:<>``, ``RSET``: no message); in a process that delivers, the error its
  deliveries met can be given instead (``smtp=mf.deliverer.problem``).

A SQLite URL whose file does not exist fails ``database`` without creating the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from mailfathom import hints
from mailfathom.clock import Clock
from mailfathom.errors import MailFathomError, StoreError
from mailfathom.store import open_store
from mailfathom.store.migrate import load_migrations
from mailfathom.store.sql_store import SqlStore

__all__ = ["Check", "Report", "check_store", "check_url", "describe_unhandled"]


@dataclass(frozen=True, slots=True)
class Check:
    """One check's verdict."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    """Every check run; healthy when all passed."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the body of ``/healthz``)."""
        return {
            "status": "ok" if self.ok else "failing",
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in self.checks},
        }


#: Tells what is wrong with the SMTP configuration (what to fix), or None when nothing is.
SmtpProblem = Callable[[], "str | None"]


def check_store(
    store: SqlStore,
    clock: Clock,
    *,
    worker_id: str | None = None,
    smtp: SmtpProblem | None = None,
) -> Report:
    """Run the checks on an open store (see the module docstring); ``smtp``, when
    given, tells the SMTP configuration error in force."""
    checks = [_database(store)]
    if not checks[0].ok:
        return Report((*checks, *_smtp(smtp)))
    checks.append(_migrations(store))
    if checks[-1].ok:
        checks.append(_kinds(store, clock))
    if worker_id is not None:
        checks.append(_heartbeat(store, clock, worker_id))
    return Report((*checks, *_smtp(smtp)))


def check_url(
    url: str, clock: Clock, *, worker_id: str | None = None, smtp: SmtpProblem | None = None
) -> Report:
    """Open the database at ``url``, run the checks, close it."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if path and not os.path.exists(path):
            detail = (
                f"no SQLite database at {os.path.abspath(path)}: check the URL, or run "
                f"{hints.command('migrate')}"
            )
            return Report((Check("database", False, detail), *_smtp(smtp)))
    try:
        store = open_store(url)
    except MailFathomError as exc:
        return Report((Check("database", False, str(exc)), *_smtp(smtp)))
    try:
        return check_store(store, clock, worker_id=worker_id, smtp=smtp)
    finally:
        store.close()


def _smtp(smtp: SmtpProblem | None) -> tuple[Check, ...]:
    if smtp is None:
        return ()
    problem = smtp()
    if problem is not None:
        return (
            Check(
                "smtp",
                False,
                f"SMTP configuration error, delivery paused (no attempt spent): {problem}",
            ),
        )
    return (Check("smtp", True, "no configuration error (an unreachable server is retried)"),)


def _database(store: SqlStore) -> Check:
    try:
        with store.db.reading() as cur:
            cur.execute(store.db.queries["metrics_ping"])
            cur.fetchone()
    except StoreError as exc:
        return Check("database", False, f"the database does not answer: {exc}")
    return Check("database", True, f"{store.dialect} answers")


def _migrations(store: SqlStore) -> Check:
    known = [version for version, _, _ in load_migrations(store.dialect)]
    try:
        applied = store.console.applied_migrations()
    except StoreError:
        applied = []
    missing = sorted(set(known) - set(applied))
    newer = sorted(set(applied) - set(known))
    if missing:
        return Check(
            "migrations",
            False,
            f"{len(missing)} of {len(known)} migration(s) not applied (first: {missing[0]}): "
            f"run {hints.command('migrate')}",
        )
    if newer:
        return Check(
            "migrations",
            False,
            f"the database has migration(s) {newer} this version does not know: upgrade "
            "mailfathom here",
        )
    return Check("migrations", True, f"all {len(known)} applied")


def _kinds(store: SqlStore, clock: Clock) -> Check:
    """Passes whatever it finds (a rolling deploy goes through this state: the new
    producers may enqueue a kind before the first new worker starts), but says which due
    jobs no live worker handles; the gauge ``mailfathom_jobs_unhandled`` is what to
    alert on."""
    try:
        unhandled = store.console.unhandled_kinds(clock.now())
    except StoreError as exc:
        return Check("kinds", False, f"the due jobs' kinds cannot be read: {exc}")
    if not unhandled:
        return Check("kinds", True, "every due job's kind has a live worker (or none is alive)")
    return Check("kinds", True, describe_unhandled(unhandled))


def describe_unhandled(unhandled: dict[str, int]) -> str:
    """One sentence naming the due jobs of kinds no live worker handles, most first."""
    most = sorted(unhandled.items(), key=lambda item: (-item[1], item[0]))
    parts = [f"{count} due job(s) of kind {kind!r}" for kind, count in most[:10]]
    more = f" and {len(most) - 10} more kind(s)" if len(most) > 10 else ""
    return (
        f"{', '.join(parts)}{more} that no live worker handles: they wait, no attempt "
        "spent; start a worker whose app registers the kind, or fix the producer"
    )


def _heartbeat(store: SqlStore, clock: Clock, worker_id: str) -> Check:
    try:
        workers = {row["id"]: row for row in store.workers.list_workers()}
    except StoreError as exc:
        return Check("heartbeat", False, f"the worker registry cannot be read: {exc}")
    row = workers.get(worker_id)
    if row is None:
        return Check(
            "heartbeat",
            False,
            f"no worker {worker_id!r} is registered (not started, or stopped): see "
            f"{hints.command('workers')}",
        )
    age = clock.now() - row["last_heartbeat_at"]
    limit = timedelta(seconds=row["lease_seconds"]) + store.clock_skew
    if age > limit:
        return Check(
            "heartbeat",
            False,
            f"worker {worker_id!r} last beat {age.total_seconds():.1f}s ago, past its "
            f"{limit.total_seconds():g}s limit: its jobs return to the queue",
        )
    return Check("heartbeat", True, f"last beat {age.total_seconds():.1f}s ago")

"""Console facts as JSON-ready dicts: one shape for the API and for ``--json`` in the CLI.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Times are ISO-8601 UTC text, states and outcomes their stored names. The API's
OpenAPI document (``web/openapi.py``) describes exactly these shapes.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from mailfathom.console.outbox_service import EmailDetail, EmailPage, UnknownPage
from mailfathom.console.service import AuditPage, BulkResult, JobDetail, JobPage, Overview
from mailfathom.delivery.model import OutgoingEmail
from mailfathom.delivery.suppressions import Suppression
from mailfathom.jobs.admin.admin import Throughput
from mailfathom.jobs.admin.queues import QueueSummary
from mailfathom.jobs.admin.workers import WorkerInfo
from mailfathom.jobs.model import Attempt, Job, JobEvent
from mailfathom.jobs.schedules.schedule_admin import Schedule

__all__ = [
    "attempt_json",
    "audit_json",
    "bulk_json",
    "email_detail_json",
    "email_json",
    "email_page_json",
    "event_json",
    "job_detail_json",
    "job_json",
    "job_page_json",
    "jsonable",
    "overview_json",
    "pretty_json",
    "queue_bulk_json",
    "queue_json",
    "schedule_json",
    "suppression_json",
    "throughput_json",
    "worker_json",
]


#: Deepest nesting :func:`jsonable` follows; anything deeper becomes :data:`TOO_DEEP`. New
#: payloads are refused past 64 levels at enqueue, but rows written before that limit
#: may be deeper, and must still be listable and showable (the API, ``--json``, pages).
DEEPEST = 100
TOO_DEEP = f"(nested deeper than {DEEPEST} levels: not shown)"


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` with datetimes, enums and dataclasses turned into JSON types.

    Bounded: containers nested deeper than :data:`DEEPEST` are replaced by the text
    :data:`TOO_DEEP`, so no stored value can make a reader recurse out.
    """
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    deeper = _depth + 1
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if deeper > DEEPEST:
            return TOO_DEEP
        return {f.name: jsonable(getattr(value, f.name), deeper) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        if deeper > DEEPEST:
            return TOO_DEEP
        return {str(jsonable(k, deeper)): jsonable(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if deeper > DEEPEST:
            return TOO_DEEP
        return [jsonable(item, deeper) for item in value]
    return value


def pretty_json(value: Any, *, sort_keys: bool = True) -> str:
    """``value`` as indented JSON text for people (pages, ``jobs show``), depth-bounded."""
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=sort_keys)


def job_json(job: Job) -> dict[str, Any]:
    """A job, with ``held`` and ``attempts_left`` spelled out."""
    found: dict[str, Any] = jsonable(job)
    found.pop("created", None)
    found["held"] = job.held
    found["attempts_left"] = job.attempts_left
    return found


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    """One attempt, traceback included."""
    found: dict[str, Any] = jsonable(attempt)
    return found


def event_json(event: JobEvent) -> dict[str, Any]:
    """One audited operator action."""
    found: dict[str, Any] = jsonable(event)
    return found


def job_detail_json(detail: JobDetail) -> dict[str, Any]:
    """A job with its attempts and audit trail."""
    return {
        "job": job_json(detail.job),
        "attempts": [attempt_json(a) for a in detail.attempts],
        "events": [event_json(e) for e in detail.events],
    }


def job_page_json(page: JobPage) -> dict[str, Any]:
    """A page of jobs and the cursor to the next one."""
    return {"jobs": [job_json(j) for j in page.jobs], "next_before": page.next_before}


def audit_json(page: AuditPage) -> dict[str, Any]:
    """A page of the audit log and the cursor to the next one."""
    return {"events": [event_json(e) for e in page.events], "next_before": page.next_before}


def throughput_json(minutes: list[Throughput]) -> list[dict[str, Any]]:
    """Per-minute counts, oldest first."""
    return [jsonable(minute) for minute in minutes]


def overview_json(overview: Overview) -> dict[str, Any]:
    """The overview: counts, throughput and what waits for an operator."""
    return {
        "at": overview.at.isoformat(),
        "job_counts": {state.value: n for state, n in overview.job_counts.items()},
        "held": overview.held,
        "throughput": throughput_json(overview.throughput),
        "attention": [jsonable(item) for item in overview.attention],
        "email_counts": {stage.value: n for stage, n in overview.email_counts.items()},
        "workers_alive": overview.workers_alive,
        "workers_dead": overview.workers_dead,
        "schedules": overview.schedules,
        "schedules_paused": overview.schedules_paused,
        "retention": retention_json(overview),
        "smtp_problem": overview.smtp_problem,
        "unhandled_kinds": overview.unhandled_kinds,
    }


def retention_json(overview: Overview) -> dict[str, Any]:
    """What the console's Retention section shows: the last pruning pass (when, what it
    did, in words and as counts), who prunes now, and rows per state with how many of
    them are compacted."""
    state = overview.pruning

    def when(moment: datetime | None) -> str | None:
        return None if moment is None else moment.isoformat()

    return {
        "last_started_at": when(state.last_started_at) if state else None,
        "last_finished_at": when(state.last_finished_at) if state else None,
        "pruning_now": state.holder if state else None,
        "last_pass": overview.pruned if state and state.last_report else None,
        "last_rows": (state.last_report or {}).get("rows", {}) if state else {},
        "rows": {
            table: {name: {"rows": n, "compacted": c} for name, (n, c) in states.items()}
            for table, states in overview.retained.items()
        },
    }


def schedule_json(schedule: Schedule, now: datetime) -> dict[str, Any]:
    """A stored schedule and its next tick after ``now`` (null while paused)."""
    found: dict[str, Any] = jsonable(schedule)
    found["next_tick"] = None if schedule.paused else schedule.next_tick(now).isoformat()
    return found


def worker_json(worker: WorkerInfo) -> dict[str, Any]:
    """A registered worker (``lease`` in seconds; ``queues`` null means every queue)."""
    found: dict[str, Any] = jsonable(worker)
    return found


def suppression_json(entry: Suppression) -> dict[str, Any]:
    """A suppressed address: why (``reason``), from where (``source``), the evidence,
    since when, and who suppressed it."""
    return {
        "address": entry.address,
        "reason": entry.reason,
        "source": entry.source,
        "detail": entry.detail,
        "created_at": entry.created_at.isoformat(),
        "actor": entry.actor,
    }


def email_json(email: OutgoingEmail) -> dict[str, Any]:
    """An outgoing email record with its per-recipient outcomes."""
    found: dict[str, Any] = jsonable(email)
    found.pop("created", None)
    return found


def email_page_json(page: EmailPage) -> dict[str, Any]:
    """A page of the outbox and the cursor to the next one."""
    return {"emails": [email_json(e) for e in page.emails], "next_before": page.next_before}


def unknown_page_json(page: UnknownPage) -> dict[str, Any]:
    """A page of unknown outcomes, the cursor to the next one, and how many there are."""
    return {
        "emails": [email_json(e) for e in page.emails],
        "next_after": page.next_after,
        "total": page.total,
    }


def email_detail_json(detail: EmailDetail) -> dict[str, Any]:
    """A record, its stage history, its audit trail and its delivery job's attempts."""
    return {
        "email": email_json(detail.email),
        "history": [jsonable(entry) for entry in detail.history],
        "events": [jsonable(event) for event in detail.events],
        "attempts": [attempt_json(a) for a in detail.attempts],
    }


def bulk_json(result: BulkResult) -> dict[str, Any]:
    """What a bulk action did, and each refused id with the reason."""
    return {
        "action": result.action,
        "done": result.done,
        "refused": [{"id": job_id, "error": why} for job_id, why in result.refused.items()],
    }


def queue_json(queue: QueueSummary) -> dict[str, Any]:
    """A queue: its unfinished jobs, and its pause (who, when, why) or null."""
    found: dict[str, Any] = jsonable(queue)
    return found


def queue_bulk_json(result: BulkResult) -> dict[str, Any]:
    """What a pause or resume did: the queues acted on, and each refused one with why."""
    return {
        "action": result.action,
        "done": result.done_queues,
        "refused": [{"queue": name, "error": why} for name, why in result.refused_queues.items()],
    }

"""The operator console's one service layer: what the CLI, the web pages and the API call.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Every read and every action an operator has goes through :class:`Console`, so
the three surfaces show the same facts, refuse the same bad input with the same
message, and write the same audit trail. It sits on the public API of
:class:`~mailfathom.MailFathom` (``mf.jobs``, ``mf.enqueue``) and adds what an
operator needs on top: filters by text, bulk actions, an overview.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from mailfathom.console.limits import LimitsConsole
from mailfathom.console.outbox_service import OutboxConsole
from mailfathom.console.query import HELD, JobQuery
from mailfathom.delivery.smtp_config import SmtpCheck
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import IllegalTransition, InvalidInput, MailFathomError, NotFound
from mailfathom.jobs.admin.admin import Throughput
from mailfathom.jobs.model import Attempt, EnqueuedJob, Job, JobEvent
from mailfathom.jobs.pruner import describe_pass
from mailfathom.jobs.state import JobState
from mailfathom.store.retention.repository import PrunerState
from mailfathom.validate import check_actor

if TYPE_CHECKING:
    from mailfathom.app import MailFathom
    from mailfathom.devmail import Inbox, InboxMessage
    from mailfathom.jobs.admin.queues import QueueSummary
    from mailfathom.jobs.admin.workers import WorkerInfo
    from mailfathom.jobs.schedules.schedule_admin import Schedule

__all__ = [
    "ACTIONS",
    "Attention",
    "AuditPage",
    "BulkResult",
    "Console",
    "JobDetail",
    "JobPage",
    "Overview",
    "parse_instant",
]

Action = Literal["requeue", "drop", "release", "hold", "run_now", "abort"]
#: Each operator action on jobs, and the state filter its bulk form is limited to.
ACTIONS: dict[str, str] = {
    "requeue": JobState.DEAD_LETTERED.value,
    "drop": JobState.DEAD_LETTERED.value,
    "release": HELD,
    "hold": JobState.PENDING.value,
    "run_now": JobState.PENDING.value,
    "abort": JobState.CLAIMED.value,
}
_ACTION_NAMES = "requeue, drop, release, hold, run_now or abort"
#: Most jobs one bulk action may touch; beyond it, narrow the filter and repeat.
BULK_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Attention:
    """Something waiting for an operator: ``key`` names it for links, ``count`` how many."""

    key: str
    label: str
    count: int


@dataclass(frozen=True, slots=True)
class Overview:
    """Where everything stands right now."""

    at: datetime
    job_counts: dict[JobState, int]
    held: int
    throughput: list[Throughput]
    attention: list[Attention]
    workers_alive: int = 0
    workers_dead: int = 0
    schedules: int = 0
    schedules_paused: int = 0
    email_counts: dict[OutgoingEmailStage, int] = field(default_factory=dict)
    #: The pruner: who holds its lease, when the last pass ran and what it did.
    pruning: PrunerState | None = None
    #: ``{"jobs": {state: (rows, compacted)}, "emails": {stage: (rows, compacted)}}``.
    retained: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    #: What the last pass did, in words ("1,204 jobs Succeeded compacted, …").
    pruned: str = ""
    #: The SMTP configuration error pausing delivery (what to fix), or None.
    smtp_problem: str | None = None
    #: Kind -> due jobs of it that no live worker handles (they wait, no attempt spent);
    #: empty while no worker is alive.
    unhandled_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def total_jobs(self) -> int:
        """Every job in every state."""
        return sum(self.job_counts.values())


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a job listing; ``next_before`` pages on (None on the last page)."""

    jobs: list[Job]
    next_before: int | None


@dataclass(frozen=True, slots=True)
class JobDetail:
    """A job with every attempt and its audit trail."""

    job: Job
    attempts: list[Attempt]
    events: list[JobEvent]


@dataclass(frozen=True, slots=True)
class AuditPage:
    """One page of the audit log, newest first."""

    events: list[JobEvent]
    next_before: int | None


@dataclass(slots=True)
class BulkResult:
    """What a bulk action did: the ids it moved, and why each other one was refused."""

    action: str
    done: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    #: For pause and resume: the queues acted on, and those refused with the reason.
    done_queues: list[str] = field(default_factory=list)
    refused_queues: dict[str, str] = field(default_factory=dict)


class Console(OutboxConsole, LimitsConsole):
    """Operator reads and actions over one app (jobs here; outgoing email and flow-control
    limits in the mixins)."""

    def __init__(self, mf: MailFathom, *, inbox: Inbox | None = None) -> None:
        self.mf = mf
        #: The dev capture inbox (``mailfathom dev``), or None.
        self.inbox = inbox
        target = mf.deliverer.target
        self._smtp = (
            None
            if target is None
            else SmtpCheck(target, mf.deliverer.gate, timeout=min(mf.settings.smtp_timeout, 10.0))
        )

    # -- reads -------------------------------------------------------------------------

    def now(self) -> datetime:
        """The app clock's current instant."""
        return self.mf.clock.now()

    def kinds(self) -> list[str]:
        """The job kinds an operator may create: this process's handlers (from ``--app``),
        except mailfathom's own (``mailfathom.deliver`` jobs come from recording email)."""
        return [name for name in self.mf.registry.names() if not name.startswith("mailfathom.")]

    def overview(self) -> Overview:
        """Counts per state, throughput per minute over the last hour, what needs a person."""
        counts = self.mf.jobs.counts()
        held = self.mf.jobs.held_count()
        workers = self.workers()
        dead = sum(not worker.alive for worker in workers)
        schedules = self.schedules()
        paused = sum(schedule.paused for schedule in schedules)
        unknown = self.unknown_count()
        pruning = self.mf.retention.state()
        paused_queues = len(self.mf.queues.paused())
        attention = [
            Attention("unknown_outcomes", "emails with an unknown outcome to resolve", unknown),
            Attention("dead_lettered", "dead-lettered jobs", counts[JobState.DEAD_LETTERED]),
            Attention("held", "held jobs waiting for an operator to press Run", held),
            Attention("dead_workers", "workers silent past their lease (killed?)", dead),
            Attention("paused_queues", "queues paused: no worker claims from them", paused_queues),
        ]
        return Overview(
            at=self.now(),
            job_counts=counts,
            held=held,
            throughput=self.mf.jobs.throughput(60),
            attention=[item for item in attention if item.count],
            workers_alive=len(workers) - dead,
            workers_dead=dead,
            schedules=len(schedules),
            schedules_paused=paused,
            email_counts=self.outbox_counts(),
            pruning=pruning,
            retained=self.mf.retention.counts(),
            pruned=describe_pass(pruning.last_report),
            smtp_problem=self.smtp_problem(),
            unhandled_kinds=self.unhandled_kinds(),
        )

    def unhandled_kinds(self) -> dict[str, int]:
        """Kind -> due jobs of it no live worker handles, the most first (a worker claims
        only the kinds it has handlers for; empty while no worker is alive)."""
        found = self.mf.store.console.unhandled_kinds(self.now())
        return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

    def smtp_problem(self) -> str | None:
        """The configuration error pausing delivery: the one this process's deliveries
        met, else what a probe of the SMTP server found (at most one a minute); None if
        none. A provider's transport is not probed: its deliveries tell."""
        return self.mf.deliverer.problem() if self._smtp is None else self._smtp.problem()

    def jobs(self, query: JobQuery, *, before_id: int | None = None, limit: int = 50) -> JobPage:
        """Newest first; keyset pages of ``limit`` jobs older than ``before_id``."""
        found = self.mf.jobs.list(
            **query.list_arguments(self.now()),  # type: ignore[arg-type]
            limit=limit + 1,
            before_id=before_id,
        )
        more = len(found) > limit
        page = found[:limit]
        return JobPage(page, page[-1].id if more and page else None)

    def job(self, job_id: int) -> JobDetail:
        """The job, its attempts and its audit trail; :class:`NotFound` if it does not exist."""
        return JobDetail(
            job=self.mf.jobs.get(job_id),
            attempts=self.mf.jobs.attempts(job_id),
            events=self.mf.jobs.events(job_id),
        )

    def audit(self, *, before_id: int | None = None, limit: int = 100) -> AuditPage:
        """Operator actions on every job, newest first."""
        found = self.mf.jobs.audit(limit=limit + 1, before_id=before_id)
        more = len(found) > limit
        page = found[:limit]
        return AuditPage(page, page[-1].id if more and page else None)

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, alive or silent past its lease, oldest first."""
        return self.mf.workers.list()

    def schedules(self) -> list[Schedule]:
        """Every stored recurring schedule, by name."""
        return self.mf.schedules.list()

    def schedule(self, name: str) -> Schedule:
        """One stored schedule; :class:`NotFound` if there is none."""
        return self.mf.schedules.get(name)

    def pause_schedule(self, name: str, *, actor: str, reason: str | None = None) -> Schedule:
        """Stop every worker from enqueueing ``name`` until it is resumed."""
        return self.mf.schedules.pause(name, actor=actor, reason=_reason(reason))

    def resume_schedule(self, name: str, *, actor: str) -> Schedule:
        """Enqueue ``name`` again from its next tick (ticks missed while paused are skipped)."""
        return self.mf.schedules.resume(name, actor=actor)

    def inbox_messages(self, limit: int = 200) -> list[InboxMessage]:
        """Messages the dev capture server received, newest first."""
        return self._inbox().messages(limit)

    def inbox_count(self) -> int:
        """How many captured messages the dev inbox holds."""
        return self._inbox().count()

    def inbox_message(self, key: str) -> InboxMessage:
        """One captured message."""
        return self._inbox().get(key)

    def clear_inbox(self) -> int:
        """Delete every captured message; how many there were."""
        return self._inbox().clear()

    def _inbox(self) -> Inbox:
        if self.inbox is None:
            raise NotFound("this console has no capture inbox: it comes with `mailfathom dev`")
        return self.inbox

    # -- actions -----------------------------------------------------------------------

    def act(self, action: str, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """Requeue, drop, release, hold, run now or abort one job (audited); an illegal
        move changes nothing."""
        move = self._action(action)
        return move(job_id, actor=actor, reason=_reason(reason))

    def matching_ids(self, action: str, query: JobQuery) -> list[int]:
        """Ids of the jobs ``query`` selects for ``action``, newest first.

        Requeue and drop act on dead letters, release on held jobs: a filter asking
        for another state is refused rather than silently narrowed.
        """
        self._action(action)
        state = ACTIONS[action]
        if query.state not in (None, state):
            raise InvalidInput(
                f"{action} acts on {state} jobs only, but the filter asks for {query.state} "
                f"jobs: drop the state filter or use {state}"
            )
        query = query.with_state(state)
        ids: list[int] = []
        before: int | None = None
        wanted = _selects(action, self.now())
        while True:
            page = self.jobs(query, before_id=before, limit=1000)
            ids.extend(job.id for job in page.jobs if wanted(job))
            if len(ids) > BULK_LIMIT:
                raise InvalidInput(
                    f"more than {BULK_LIMIT} jobs match ({query.describe()}): narrow the filter "
                    "and repeat; nothing changed"
                )
            if page.next_before is None:
                return ids
            before = page.next_before

    def bulk(
        self,
        action: str,
        ids: Sequence[int],
        *,
        actor: str,
        reason: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> BulkResult:
        """Apply ``action`` to each id, each one audited on its own.

        A job that moved on meanwhile (or does not exist) is refused and listed with
        the reason; the others go ahead. ``progress`` is called after each job.
        """
        move = self._action(action)
        reason = _reason(reason)
        if not isinstance(actor, str) or not actor.strip():
            raise InvalidInput("actor must name who acts (for the audit trail); nothing changed")
        check_actor(actor, reason)  # before the first job: refused text changes nothing
        if len(ids) > BULK_LIMIT:
            raise InvalidInput(f"at most {BULK_LIMIT} jobs at once; nothing changed")
        for job_id in ids:
            if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
                raise InvalidInput(f"a job id is a positive integer, not {job_id!r}")
        result = BulkResult(action)
        for job_id in ids:
            try:
                move(job_id, actor=actor, reason=reason)
            except MailFathomError as exc:
                result.refused[job_id] = str(exc)
            else:
                result.done.append(job_id)
            if progress is not None:
                progress(1)
        return result

    def create_job(
        self,
        kind: str,
        payload: Mapping[str, Any] | str | None,
        *,
        queue: str | None = None,
        priority: int = 0,
        run_at: datetime | str | None = None,
        hold: bool | None = None,
        idempotency_key: str | None = None,
    ) -> EnqueuedJob:
        """Create a job as an operator. Held (waiting for Run) unless ``run_at`` is given.

        ``payload`` may be JSON text. The kind obeys the rule of every enqueue
        (:meth:`~mailfathom.jobs.registry.Registry.check_enqueue`): with ``--app``, one
        the app has a handler for, so a typo cannot create a job nobody runs.
        """
        if isinstance(payload, str):
            payload = parse_payload(payload)
        when = parse_instant(run_at) if isinstance(run_at, str) else run_at
        return self.mf.enqueue(
            kind,
            payload,
            queue=queue,
            priority=priority,
            run_at=when,
            hold=(when is None) if hold is None else hold,
            idempotency_key=idempotency_key,
        )

    def _action(self, action: str) -> Callable[..., Job]:
        moves: dict[str, Callable[..., Job]] = {
            "requeue": self.mf.jobs.requeue,
            "drop": self.mf.jobs.drop,
            "release": self.mf.jobs.release,
            "hold": self.mf.jobs.hold,
            "run_now": self.mf.jobs.run_now,
            "abort": self.mf.jobs.abort,
        }
        if action not in moves:
            raise InvalidInput(f"unknown action {action!r}: use {_ACTION_NAMES}")
        return moves[action]

    # -- queues ------------------------------------------------------------------------

    def queues(self) -> list[QueueSummary]:
        """Every queue with unfinished jobs or a pause, by name."""
        return self.mf.queues.list()

    def pause_queues(
        self, names: Sequence[str], *, actor: str, reason: str | None = None
    ) -> BulkResult:
        """Pause each named queue (audited each); one already paused is refused and listed."""
        return self._each_queue("pause", names, self.mf.queues.pause, actor, reason)

    def resume_queues(
        self, names: Sequence[str], *, actor: str, reason: str | None = None
    ) -> BulkResult:
        """Resume each named queue (audited each); one not paused is refused and listed."""
        return self._each_queue("resume", names, self.mf.queues.resume, actor, reason)

    def _each_queue(
        self,
        action: str,
        names: Sequence[str],
        move: Callable[..., object],
        actor: str,
        reason: str | None,
    ) -> BulkResult:
        if isinstance(names, str) or not names:
            raise InvalidInput("name the queues to act on (a list of queue names)")
        check_actor(actor, reason)  # before the first queue: refused text changes nothing
        result = BulkResult(action)
        reason = _reason(reason)
        for name in dict.fromkeys(names):
            try:
                move(name, actor=actor, reason=reason)
            except IllegalTransition as exc:
                result.refused_queues[name] = str(exc)
            else:
                result.done_queues.append(name)
        return result


def _selects(action: str, now: datetime) -> Callable[[Job], bool]:
    """Which jobs of the action's state a bulk form takes: hold skips held jobs, run now
    takes only jobs not due yet; the others take every job of the state."""
    if action == "hold":
        return lambda job: job.available_at is not None
    if action == "run_now":
        return lambda job: job.available_at is not None and job.available_at > now
    return lambda job: True


def parse_payload(text: str) -> dict[str, Any]:
    """A payload from JSON text: an object, or a clear error saying where the JSON is wrong."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"payload is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}): "
            'write an object such as {"report_id": 7}'
        ) from None
    except (RecursionError, ValueError) as exc:  # nested too deeply; an int over 4300 digits
        why = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInput(f"payload cannot be read ({why}): flatten it or shorten it") from None
    if not isinstance(value, dict):
        raise InvalidInput(
            f'payload must be a JSON object such as {{"report_id": 7}}, not {type(value).__name__}'
        )
    return value


def parse_instant(text: str) -> datetime:
    """An ISO-8601 instant; without a zone it is taken as UTC (the console shows UTC)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"{text!r} is not a date and time: write ISO 8601, e.g. 2030-01-31T09:30 (UTC) "
            "or 2030-01-31T09:30+02:00"
        ) from None
    return moment


def _reason(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    if len(reason) > 2000:
        raise InvalidInput("reason must be at most 2000 characters")
    return reason.strip()

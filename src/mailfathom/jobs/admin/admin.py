"""``mf.jobs``: what operators read and do — get, list, count, history, requeue, drop,
release, hold, run now, abort.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Every operator action is conditional on the job's current state and written to
the audit trail in the same transaction; from any other state it is refused
with :class:`~mailfathom.errors.IllegalTransition` and nothing changes.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta

from mailfathom.clock import Clock, utc
from mailfathom.errors import IllegalTransition, InvalidInput, NotFound
from mailfathom.jobs.model import Attempt, Job, JobEvent
from mailfathom.jobs.registry import check_name
from mailfathom.jobs.state import JobState
from mailfathom.store.base import JobFilter, JobRow, OperatorAction
from mailfathom.store.jobs.protocol import JobsStore
from mailfathom.validate import check_actor, check_id, check_limit

__all__ = ["Jobs", "Throughput"]

REQUEUE = OperatorAction("requeue", "requeue_job", ("DeadLettered",), "Pending")
DROP = OperatorAction("drop", "drop_job", ("DeadLettered",), "Dropped")
RELEASE = OperatorAction("release", "release_job", ("Pending",), "Pending")
HOLD = OperatorAction("hold", "hold_job", ("Pending",), "Pending")
RUN_NOW = OperatorAction("run_now", "run_now_job", ("Pending",), "Pending")
ABORT = OperatorAction("abort", "abort_job", ("Pending", "Claimed"), "DeadLettered")
#: How often an action is tried when the job keeps racing back into a state it starts from.
_TRIES = 3


@dataclass(slots=True)
class Throughput:
    """What finished in one UTC minute (``minute`` is its start)."""

    minute: datetime
    succeeded: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    failed_attempts: int = 0

    def add(self, outcome: str, n: int) -> None:
        """Count ``n`` more of ``outcome`` (a terminal state name, or ``Failed``)."""
        if outcome == JobState.SUCCEEDED.value:
            self.succeeded += n
        elif outcome == JobState.DEAD_LETTERED.value:
            self.dead_lettered += n
        elif outcome == JobState.DROPPED.value:
            self.dropped += n
        else:
            self.failed_attempts += n


class Jobs:
    """Read and act on jobs as an operator."""

    def __init__(self, store: JobsStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def get(self, job_id: int) -> Job:
        """The job with ``job_id``; :class:`NotFound` if there is none."""
        row = self._store.get_job(check_id(job_id))
        if row is None:
            raise NotFound(f"no job has id {job_id}: list jobs to find the one you mean")
        return Job.from_row(row)

    def list(
        self,
        state: JobState | str | None = None,
        *,
        kind: str | None = None,
        queue: str | None = None,
        held: bool = False,
        text: str | None = None,
        created_before: datetime | None = None,
        created_after: datetime | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> builtins.list[Job]:
        """Jobs newest first, filtered; page with ``before_id`` = the last id you saw.

        ``held=True`` keeps held jobs only. ``text`` matches (ignoring ASCII case) any
        part of the failure reason, the idempotency key, or a key or a string or
        number value anywhere in the payload.
        ``created_before`` / ``created_after`` bound when the job was enqueued.
        """
        check_limit(limit)
        if text is not None and (
            not isinstance(text, str) or not 1 <= len(text) <= 200 or "\x00" in text
        ):
            raise InvalidInput(
                f"text must be 1-200 characters (no NUL) to search for, not {text!r}"
            )
        filter = JobFilter(
            state=None if state is None else JobState.parse(state).value,
            kind=None if kind is None else check_name("job kind", kind, longest=200),
            queue=None if queue is None else check_name("queue", queue, longest=100),
            held=bool(held),
            text=text,
            created_before=None if created_before is None else utc(created_before),
            created_after=None if created_after is None else utc(created_after),
        )
        before = None if before_id is None else check_id(before_id)
        rows = self._store.list_jobs(filter, limit=limit, before_id=before)
        return [Job.from_row(row) for row in rows]

    def held_count(self) -> int:
        """How many jobs are held, waiting for an operator to release them."""
        return self._store.count_held()

    def audit(self, *, limit: int = 100, before_id: int | None = None) -> builtins.list[JobEvent]:
        """Every operator action on any job, newest first; page with ``before_id``."""
        check_limit(limit)
        before = None if before_id is None else check_id(before_id)
        rows = self._store.recent_events(limit=limit, before_id=before)
        return [JobEvent.from_row(row) for row in rows]

    def throughput(self, minutes: int = 60) -> builtins.list[Throughput]:
        """Per UTC minute over the last ``minutes``, oldest first, every minute present:
        jobs that succeeded, dead-lettered or were dropped, and attempts that failed."""
        check_limit(minutes, name="minutes", high=1440)
        now = self._clock.now().replace(second=0, microsecond=0)
        start = now - timedelta(minutes=minutes - 1)
        buckets = {
            (start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M"): Throughput(
                minute=start + timedelta(minutes=i)
            )
            for i in range(minutes)
        }
        for row in self._store.throughput(since=start):
            bucket = buckets.get(row["minute"])
            if bucket is not None:
                bucket.add(row["outcome"], row["n"])
        return builtins.list(buckets.values())

    def counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zero included)."""
        stored = self._store.count_jobs()
        return {state: stored.get(state.value, 0) for state in JobState}

    def attempts(self, job_id: int) -> builtins.list[Attempt]:
        """Every attempt of the job, oldest first, the successful one included."""
        job = self.get(job_id)
        found = [Attempt.from_row(row) for row in self._store.attempts(job.id)]
        if job.state is JobState.SUCCEEDED:
            found.append(Attempt.success_of(job))
        return found

    def events(self, job_id: int) -> builtins.list[JobEvent]:
        """The job's audit trail of operator actions, oldest first."""
        job = self.get(job_id)
        return [JobEvent.from_row(row) for row in self._store.events(job.id)]

    def requeue(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """DeadLettered → Pending, due now, with a fresh attempt budget; history is kept."""
        return self._move(job_id, REQUEUE, actor, reason)

    def drop(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """DeadLettered → Dropped: the job will never run."""
        return self._move(job_id, DROP, actor, reason)

    def release(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """A held job (Pending with no available instant) becomes due now ("run now")."""
        return self._move(job_id, RELEASE, actor, reason)

    def hold(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """A Pending job no worker holds waits (held) until :meth:`release`: how an operator
        stops work that has not failed."""
        return self._move(job_id, HOLD, actor, reason)

    def run_now(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """A delayed or backed-off Pending job becomes due now (a held one: :meth:`release`)."""
        return self._move(job_id, RUN_NOW, actor, reason)

    def abort(self, job_id: int, *, actor: str, reason: str | None = None) -> Job:
        """Stop a job for good: once this returns, the job never starts again.

        A Pending job (held or not) is dead-lettered at once, as permanent, "aborted by
        <actor>: <reason> (before it started)". A Claimed one is asked to stop: its
        worker learns of it at its next heartbeat (a third of the lease) and cancels a
        coroutine, kills a process-isolated attempt, and sets ``ctx.abort_requested``
        for a plain handler; the attempt is recorded as ``Aborted`` and the job
        dead-lettered as permanent, "aborted by <actor>: <reason>". However the
        attempt ends before that (a failure, a ``Snooze``, a release of a job claimed
        ahead, a lost lease reaped) it is dead-lettered the same way, never retried. A
        handler that returned before it could see the request keeps its success (the
        work was done): the row stays Succeeded and its audit trail says the abort came
        too late. Requeue and drop apply to the dead letter. Returns the job: Claimed
        (asked to stop) or DeadLettered.
        """
        return self._move(job_id, ABORT, actor, reason)

    def _move(self, job_id: int, move: OperatorAction, actor: str, reason: str | None) -> Job:
        check_actor(actor, reason)
        check_id(job_id)
        for _ in range(_TRIES):
            moved, current = self._store.operator_move(
                job_id, move, actor=actor, reason=reason, now=self._clock.now()
            )
            if moved is not None:
                return Job.from_row(moved)
            # The row was read before the guarded UPDATE that matched nothing: another
            # operator may have moved the job in between (PostgreSQL reads committed
            # rows). Read it again, so the error names the state it is in now.
            if current is not None:
                current = self._store.get_job(job_id)
            if current is None:
                raise NotFound(f"no job has id {job_id}: list jobs to find the one you mean")
            if not _can_start(move, current):
                raise _refusal(job_id, move, current)
        raise IllegalTransition(
            f"cannot {move.action} job {job_id}: other actions keep moving it; nothing changed, "
            "try again"
        )


def _refusal(job_id: int, move: OperatorAction, current: JobRow) -> IllegalTransition:
    state = current["state"]
    compacted = current.get("compacted_at")
    if move is REQUEUE and state == "DeadLettered" and compacted is not None:
        return IllegalTransition(
            f"cannot requeue job {job_id}: retention compacted it at {compacted:%Y-%m-%d %H:%M} "
            "UTC and its payload is gone; enqueue a new job with the payload (drop this one "
            "to close it); nothing changed",
            current=state,
            target=move.to_state,
            allowed_from=move.from_states,
        )
    if move is RELEASE and state == "Pending":
        return IllegalTransition(
            f"job {job_id} is not held (it is Pending and due at "
            f"{current['available_at']}): only a held job can be released; nothing changed"
        )
    if move is HOLD and state == "Pending":
        return IllegalTransition(f"job {job_id} is held already; nothing changed")
    if move is RUN_NOW and state == "Pending":
        if current["available_at"] is None:
            return IllegalTransition(
                f"job {job_id} is held: release it to run it now; nothing changed"
            )
        return IllegalTransition(
            f"job {job_id} is due already (since {current['available_at']}); nothing changed"
        )
    if move is ABORT and state == "Claimed":
        return IllegalTransition(
            f"job {job_id} has an abort request already ({current['abort_reason']}); "
            "nothing changed"
        )
    return IllegalTransition(
        f"cannot {move.action} job {job_id}: it is {state}, and only "
        f"{' or '.join(move.from_states)} jobs can be {_past(move.action)}; nothing changed",
        current=state,
        target=move.to_state,
        allowed_from=move.from_states,
    )


def _can_start(move: OperatorAction, job: JobRow) -> bool:
    """Whether ``move`` may start from the job as read (it raced back into a source state)."""
    if job["state"] not in move.from_states:
        return False
    if move is REQUEUE and job.get("compacted_at") is not None:
        return False
    if move is RELEASE:
        return job["available_at"] is None
    if move is HOLD:
        return job["available_at"] is not None
    if move is RUN_NOW:
        return False  # "due" depends on the instant: the refusal says what it is now
    if move is ABORT:
        return job["abort_reason"] is None
    return True


def _past(action: str) -> str:
    return {
        "requeue": "requeued",
        "drop": "dropped",
        "release": "released",
        "hold": "held",
        "run_now": "run now",
        "abort": "aborted",
    }[action]

"""The queue's operations: enqueue (validated), claim under a lease, record outcomes.

Internal; the public face is :class:`mailfathom.MailFathom`. Every operation reads
``now`` from the injected clock and hands it to the store.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import chain
from typing import Any, Literal, overload

from mailfathom.batch_ids import BatchIds
from mailfathom.chunking import Column, split_first
from mailfathom.clock import Clock
from mailfathom.errors import InvalidInput
from mailfathom.jobs.failures import JobAborted, PermanentFailure, Snooze, TransientFailure
from mailfathom.jobs.flow.limits import check_key_value, compute_key
from mailfathom.jobs.model import EnqueuedJob, Job, enqueued_jobs
from mailfathom.jobs.payload import encode as payload_text
from mailfathom.jobs.payload import encode_and_copy
from mailfathom.jobs.reasons import (
    TRACEBACK_LIMIT,
    describe_error,
    error_type,
    reason_of,
    storable,
    text_of,
    traceback_text,
    type_name,
)
from mailfathom.jobs.registry import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    JobKind,
    Registry,
    check_name,
)
from mailfathom.jobs.retry import RETRY_AFTER_LIMIT, Backoff, retry_delay
from mailfathom.jobs.signals import HardStop
from mailfathom.jobs.state import AttemptOutcome, FailureClass
from mailfathom.observability import tracing
from mailfathom.store.base import FailedAttempt, JobRow, NewJobs
from mailfathom.store.protocol import Store
from mailfathom.validate import available_at, check_key, check_max_attempts, check_priority

__all__ = ["Finished", "JobQueue", "describe_error", "transient_attempt"]

_DEFAULT_BACKOFF = Backoff()

#: The default of :attr:`JobQueue.enqueue_chunk`: large enough that PostgreSQL's one
#: statement per chunk costs what one statement for the batch did, small enough that a
#: chunk's texts and ids are a few MB.
ENQUEUE_CHUNK = 10_000


#: Told what became of an attempt's outcome once its transaction has committed: the
#: outcome the store recorded (the attempt's own, or the fallback ``Failed``) and its
#: message, or ``(None, None)`` when nothing was recorded (the lease had moved on).
Observer = Callable[["Finished", "str | None", "str | None"], None]


@dataclass(frozen=True, slots=True)
class Finished:
    """How one attempt of a claimed job ended, before the store records it."""

    job: Job
    outcome: AttemptOutcome
    error: BaseException | None = None
    traceback: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    #: Called by the recorder after the outcome's commit (metrics, span, log line), so
    #: that nothing is counted or logged as done that the database does not hold.
    observer: Observer | None = field(default=None, compare=False, repr=False)
    #: A succeeded attempt's result as JSON text (None: the handler returned None).
    result: str | None = None


class JobQueue:
    """Enqueue, claim and finish jobs against a store, with time from a clock."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Clock,
        *,
        max_payload_bytes: int,
        snooze_limit: int = 100,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        #: Snoozes a job may take before a snooze counts as a transient failure.
        self.snooze_limit = snooze_limit
        self._rng = rng or random.Random()
        #: Jobs ``enqueue_many`` validates, encodes and writes at a time: a larger batch
        #: is written chunk after chunk in its one transaction, so that what it holds
        #: besides the caller's payloads and the returned jobs stays bounded.
        self.enqueue_chunk = ENQUEUE_CHUNK

    # -- enqueue -----------------------------------------------------------------------

    @overload
    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        limit_keys: Iterable[str | None] | None = None,
        returning: Literal["jobs"] = "jobs",
    ) -> list[EnqueuedJob]: ...

    @overload
    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        limit_keys: Iterable[str | None] | None = None,
        returning: Literal["ids"],
    ) -> BatchIds: ...

    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        limit_keys: Iterable[str | None] | None = None,
        returning: Literal["jobs", "ids"] = "jobs",
    ) -> list[EnqueuedJob] | BatchIds:
        """Validate and insert every job in one transaction, all or nothing.

        ``payloads`` (and ``idempotency_keys``, ``limit_keys``) may be any iterable: it
        is read :attr:`enqueue_chunk` jobs at a time. A batch of up to that many jobs is
        validated whole before anything is written; a larger one chunk by chunk inside
        its transaction, which a bad item in any chunk (or an error raised by the
        iterable itself) rolls back, so that a bad item anywhere still writes nothing.

        ``returning="jobs"``: a list of :class:`EnqueuedJob`; ``"ids"``: a
        :class:`BatchIds`, 8 bytes a job, so that the call's memory is a chunk's.

        Each job's flow-control limit key is ``limit_keys[i]`` when given (internal
        callers), else the registered kind's ``limit_key(payload)``; a key function that
        raises or returns something unusable is a clear error and nothing is enqueued."""
        check_name("job kind", kind, longest=200)
        self.registry.check_enqueue(kind)
        if returning not in ("jobs", "ids"):
            raise InvalidInput(f'returning must be "jobs" or "ids", not {returning!r}')
        if isinstance(payloads, (str, bytes, Mapping)) or not isinstance(payloads, Iterable):
            raise InvalidInput("payloads must be a list of payload dicts, one per job")
        total = _checked_total(payloads, idempotency_keys, limit_keys)
        now = self.clock.now()
        registered = self.registry.get(kind)
        if queue is None:
            queue = registered.queue if registered else DEFAULT_QUEUE
        check_name("queue", queue, longest=100)
        if max_attempts is None:
            max_attempts = registered.max_attempts if registered else DEFAULT_MAX_ATTEMPTS
        attempts = check_max_attempts(max_attempts)
        due = available_at(now, delay=delay, run_at=run_at, hold=hold)
        priority = check_priority(priority)
        with tracing.enqueue_span(kind, queue, total):
            batch = _Batch(
                shared=NewJobs(
                    kind=kind,
                    queue=queue,
                    payloads=(),
                    priority=priority,
                    available_at=due,
                    max_attempts=attempts,
                    trace_context=tracing.current_traceparent(),  # None unless tracing is on
                ),
                registered=registered,
                max_bytes=self.max_payload_bytes,
                as_jobs=returning == "jobs",
                keys=Column("idempotency_keys", idempotency_keys, "payloads"),
                limits=Column("limit_keys", limit_keys, "payloads"),
                now=now,
            )
            first, more = split_first(payloads, max(self.enqueue_chunk, 1))
            if more is None:  # the common case: one chunk, the store's one-statement path
                chunk = batch.chunk(first, 0)
                batch.finish(len(first))
                batch.done(chunk, self.store.jobs.enqueue(chunk, now=now, connection=connection))
            else:
                self.store.jobs.enqueue_chunks(
                    batch.chunks(first, more), now=now, connection=connection, done=batch.done
                )
            return batch.jobs if batch.as_jobs else batch.ids

    def enqueue_one(
        self,
        kind: str,
        payload: Mapping[str, Any] | None,
        *,
        idempotency_key: str | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
    ) -> EnqueuedJob:
        """One job: the checks and the write of :meth:`enqueue_many` for a batch of one,
        in the same order, without its chunking (the most common call, paid per job)."""
        check_name("job kind", kind, longest=200)
        self.registry.check_enqueue(kind)
        now = self.clock.now()
        registered = self.registry.get(kind)
        if queue is None:
            queue = registered.queue if registered else DEFAULT_QUEUE
        check_name("queue", queue, longest=100)
        if max_attempts is None:
            max_attempts = registered.max_attempts if registered else DEFAULT_MAX_ATTEMPTS
        attempts = check_max_attempts(max_attempts)
        due = available_at(now, delay=delay, run_at=run_at, hold=hold)
        priority = check_priority(priority)
        key = check_key(idempotency_key)
        with tracing.enqueue_span(kind, queue, 1):
            text, copy = encode_and_copy(payload, max_bytes=self.max_payload_bytes)
            batch = NewJobs(
                kind=kind,
                queue=queue,
                payloads=[text],
                priority=priority,
                available_at=due,
                max_attempts=attempts,
                idempotency_keys=None if key is None else [key],
                trace_context=tracing.current_traceparent(),
                limit_keys=self.limit_keys(kind, registered, [payload], None),
            )
            results = self.store.jobs.enqueue(batch, now=now, connection=connection)
            return enqueued_jobs(batch, results, now, [copy])[0]

    @staticmethod
    def limit_keys(
        kind: str,
        registered: JobKind | None,
        payloads: Sequence[Mapping[str, Any] | None],
        given: Sequence[str | None] | None,
        offset: int = 0,
    ) -> list[str | None] | None:
        """Each job's limit key: ``given``, else the kind's function of the payload (None
        when neither applies)."""
        if given is not None:
            if len(given) != len(payloads):  # pragma: no cover - checked for the whole call
                raise InvalidInput("limit_keys must have one entry (or None) per payload")
            return [None if key is None else check_key_value(key) for key in given]
        function = registered.limit_key if registered is not None else None
        if function is None:
            return None
        return [
            compute_key(kind, function, payload or {}, index)
            for index, payload in enumerate(payloads, offset)
        ]

    def encode_payload(self, payload: Mapping[str, Any] | None) -> str:
        """JSON text that reads back exactly as ``payload``, or a clear :class:`PayloadError`
        naming the path (the rules are in :mod:`mailfathom.jobs.payload`)."""
        return payload_text(payload, max_bytes=self.max_payload_bytes)

    # -- claim and finish --------------------------------------------------------------

    def claim(
        self,
        owner: str,
        limit: int,
        lease: timedelta,
        queues: Sequence[str] | None = None,
        *,
        reap: bool = True,
    ) -> list[Job]:
        """Lease up to ``limit`` due jobs to ``owner`` for ``lease`` (first returning
        expired leases to the queue, unless ``reap`` is False)."""
        now = self.clock.now()
        rows = self.store.claims.claim(
            owner=owner, limit=limit, now=now, lease_until=now + lease, queues=queues, reap=reap
        )
        return [Job.from_row(row) for row in rows]

    def failure(self, result: Finished, now: datetime) -> FailedAttempt:
        """Classify a failed attempt and decide: retry at some instant, or dead-letter.

        Total: whatever the handler raised or carried (an unprintable message, an
        absurd ``retry_after``, a misbehaving ``__cause__`` ...), this returns an
        attempt both stores accept, with a readable reason; it never raises.
        """
        try:
            return self._failure(result, now)
        except HardStop:
            raise
        except BaseException as exc:  # a bug of ours, or an object past every guard
            return self._undescribed(result, now, exc)

    def _failure(self, result: Finished, now: datetime) -> FailedAttempt:
        job, error = result.job, result.error
        kind = self.registry.get(job.kind)
        if result.outcome is AttemptOutcome.ABORTED or issubclass(type(error), JobAborted):
            return self._aborted(result)
        if error is not None and issubclass(type(error), Snooze):
            if job.snoozes < self.snooze_limit:
                return self._snoozed(result, error, now)  # type: ignore[arg-type]
            error = TransientFailure(
                f"snoozed {job.snoozes} times, the snooze_limit setting's cap: the next "
                "snooze counts as a failure (raise the limit or fix the handler)"
            )
            result = Finished(job, result.outcome, error=error, started_at=result.started_at)
        if result.message:
            message = storable(text_of(result.message))
        elif error is not None:
            message = reason_of(error)
        else:
            message = result.outcome.value
        used = job.attempts - job.attempt_base
        if error is not None and _is_permanent(error, kind):
            failure_class, retry_at = FailureClass.PERMANENT, None
        elif used >= job.max_attempts:
            failure_class, retry_at = FailureClass.TRANSIENT, None
            message = f"attempts exhausted ({used} of {job.max_attempts}): {message}"
        else:
            failure_class = FailureClass.TRANSIENT
            retry_after, note = None, None
            if error is not None and issubclass(type(error), TransientFailure):
                retry_after, note = retry_delay(_retry_after(error))
            if note is not None:
                message = f"{message} ({note})"
            if retry_after is None:
                backoff = kind.backoff if kind is not None else _DEFAULT_BACKOFF
                retry_after = backoff.delay(used, self._rng)
            retry_at = _later(now, retry_after)
        if isinstance(result.traceback, str):
            tb: str | None = storable(result.traceback, TRACEBACK_LIMIT, keep_end=True)
        else:
            tb = traceback_text(error) if error is not None else None
        return FailedAttempt(
            job_id=job.id,
            attempt=job.attempts,
            outcome=result.outcome.value,
            failure_class=failure_class.value,
            error_type=error_type(error) if error is not None else None,
            message=message,
            traceback=tb,
            started_at=result.started_at or job.claimed_at,
            retry_at=retry_at,
        )

    def _undescribed(self, result: Finished, now: datetime, exc: BaseException) -> FailedAttempt:
        """The attempt of a failure that could not be read: transient, saying so."""
        job = result.job
        outcome = result.outcome if isinstance(result.outcome, AttemptOutcome) else None
        return transient_attempt(
            job,
            outcome=outcome or AttemptOutcome.FAILED,
            message=(
                f"the failure could not be described ({type_name(type(exc))} while reading "
                "it); see the worker's log"
            ),
            started_at=result.started_at or job.claimed_at,
            retry_at=now + _DEFAULT_BACKOFF.delay(job.attempts - job.attempt_base, self._rng),
        )

    def _aborted(self, result: Finished) -> FailedAttempt:
        """An operator's abort: the attempt is Aborted, the job dead-lettered as permanent."""
        job, error = result.job, result.error
        if result.outcome is AttemptOutcome.ABORTED and result.message:
            message = storable(text_of(result.message))  # the operator's "aborted by ..."
        elif error is not None and issubclass(type(error), JobAborted):
            message = storable(text_of(error.reason))  # type: ignore[attr-defined]
        elif result.message:
            message = storable(text_of(result.message))
        else:
            message = "aborted by an operator"
        return FailedAttempt(
            job_id=job.id,
            attempt=job.attempts,
            outcome=AttemptOutcome.ABORTED.value,
            failure_class=FailureClass.PERMANENT.value,
            error_type=error_type(error) if error is not None else None,
            message=message,
            traceback=storable(result.traceback, TRACEBACK_LIMIT, keep_end=True)
            if isinstance(result.traceback, str)
            else None,
            started_at=result.started_at or job.claimed_at,
            retry_at=None,
        )

    def _snoozed(self, result: Finished, snooze: Snooze, now: datetime) -> FailedAttempt:
        """``raise Snooze(s)``: Pending again at now + s, the attempt not counted."""
        job = result.job
        return FailedAttempt(
            job_id=job.id,
            attempt=job.attempts,
            outcome=AttemptOutcome.SNOOZED.value,
            failure_class=FailureClass.TRANSIENT.value,
            error_type=None,
            message=f"snoozed for {snooze.seconds:g} s ({job.snoozes + 1} of at most "
            f"{self.snooze_limit} snoozes)",
            traceback=None,
            started_at=result.started_at or job.claimed_at,
            retry_at=now + timedelta(seconds=snooze.seconds),
            snoozed=True,
        )


def _checked_total(
    payloads: Iterable[Any],
    idempotency_keys: Iterable[str | None] | None,
    limit_keys: Iterable[str | None] | None,
) -> int | None:
    """The batch's size when its payloads know it (None for an iterator), once the
    per-job inputs that know theirs are checked to match it."""
    if isinstance(idempotency_keys, (str, bytes)):
        raise InvalidInput("idempotency_keys must be a list: one key (or None) per payload")
    total = len(payloads) if isinstance(payloads, Sized) else None
    if (
        idempotency_keys is not None
        and total is not None
        and isinstance(idempotency_keys, Sized)
        and len(idempotency_keys) != total
    ):
        raise InvalidInput(
            f"idempotency_keys has {len(idempotency_keys)} entries for {total} "
            "payloads: give one key (or None) per payload"
        )
    if (
        limit_keys is not None
        and total is not None
        and isinstance(limit_keys, Sized)
        and len(limit_keys) != total
    ):
        raise InvalidInput("limit_keys must have one entry (or None) per payload")
    return total


@dataclass(slots=True)
class _Batch:
    """One ``enqueue_many`` call's chunks: each validated and encoded when the store asks
    for it, and its results added to what the call returns once it is written."""

    shared: NewJobs  # what every job of the batch shares (its payloads: none)
    registered: JobKind | None
    max_bytes: int
    as_jobs: bool
    keys: Column[str]
    limits: Column[str]
    now: datetime
    seen: set[str] = field(default_factory=set)
    copies: list[dict[str, Any] | None] = field(default_factory=list)
    jobs: list[EnqueuedJob] = field(default_factory=list)
    ids: BatchIds = field(default_factory=BatchIds)

    def chunk(self, part: list[Mapping[str, Any] | None], start: int) -> NewJobs:
        """``part`` (the batch's jobs from index ``start``) validated and encoded, with
        the copies of its payloads kept in ``copies`` when jobs are returned."""
        if self.as_jobs:
            encoded = [encode_and_copy(payload, max_bytes=self.max_bytes) for payload in part]
            self.copies[:] = [copy for _, copy in encoded]
            texts = [text for text, _ in encoded]
        else:
            texts = [payload_text(payload, max_bytes=self.max_bytes) for payload in part]
        given = self.limits.take(len(part)) if self.limits.items is not None else None
        return replace(
            self.shared,
            payloads=texts,
            idempotency_keys=self._idempotency_keys(self.keys.take(len(part))),
            limit_keys=JobQueue.limit_keys(self.shared.kind, self.registered, part, given, start),
        )

    def chunks(
        self, first: list[Mapping[str, Any] | None], more: Iterator[list[Mapping[str, Any] | None]]
    ) -> Iterator[NewJobs]:
        """Every chunk in turn, each read from the input only when the store asks."""
        start = 0
        for part in chain((first,), more):
            yield self.chunk(part, start)
            start += len(part)
        self.finish(start)

    def finish(self, total: int) -> None:
        """Refuse keys left over once the ``total`` payloads are read."""
        self.keys.finish(total)
        self.limits.finish(total)

    def done(self, chunk: NewJobs, results: list[int | JobRow]) -> None:
        """Add a written chunk's results to what the call returns (then drop the chunk)."""
        if self.as_jobs:
            self.jobs.extend(enqueued_jobs(chunk, results, self.now, self.copies))
        elif all(type(result) is int for result in results):
            self.ids.add_created(results)  # type: ignore[arg-type]
        else:
            for result in results:
                if type(result) is int:
                    self.ids.add_created((result,))
                else:
                    self.ids.add_existing(result["id"])  # type: ignore[index]

    def _idempotency_keys(self, given: list[str | None]) -> list[str | None] | None:
        """A chunk's checked keys, or None when none of its jobs has one; ``seen`` holds
        the batch's keys so far (a key twice in one batch is refused)."""
        keys = [check_key(key) for key in given]
        found = False
        for key in keys:
            if key is not None:
                if key in self.seen:
                    raise InvalidInput(f"idempotency key {key!r} appears twice in one batch")
                self.seen.add(key)
                found = True
        return keys if found else None


def _is_permanent(error: BaseException, kind: JobKind | None) -> bool:
    """PermanentFailure, or a type the kind lists as permanent (a TransientFailure never)."""
    cls = type(error)
    if issubclass(cls, PermanentFailure):
        return True
    if issubclass(cls, TransientFailure) or kind is None or not kind.permanent:
        return False
    try:
        return issubclass(cls, kind.permanent)
    except HardStop:
        raise
    except BaseException:  # a listed class whose __subclasscheck__ misbehaves
        return False


def _retry_after(error: BaseException) -> object:
    """The failure's ``retry_after``; None (the backoff) when reading it raises."""
    try:
        return getattr(error, "retry_after", None)
    except HardStop:
        raise
    except BaseException:
        return None


def _later(now: datetime, delay: timedelta) -> datetime:
    try:
        return now + delay
    except OverflowError:  # a custom backoff past the year 9999
        return now + RETRY_AFTER_LIMIT


def transient_attempt(
    job: Job,
    *,
    outcome: AttemptOutcome,
    message: str,
    started_at: datetime | None,
    retry_at: datetime,
) -> FailedAttempt:
    """A transient failure known only by ``message`` (no error type, no traceback), due at
    ``retry_at`` — or dead-lettered, saying so, when the job has no attempts left."""
    used = job.attempts - job.attempt_base
    exhausted = used >= job.max_attempts
    if exhausted:
        message = f"attempts exhausted ({used} of {job.max_attempts}): {message}"
    return FailedAttempt(
        job_id=job.id,
        attempt=job.attempts,
        outcome=outcome.value,
        failure_class=FailureClass.TRANSIENT.value,
        error_type=None,
        message=message,
        traceback=None,
        started_at=started_at,
        retry_at=None if exhausted else retry_at,
    )

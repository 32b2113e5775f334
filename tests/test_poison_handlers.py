"""Nothing a handler raises or carries can stop a worker (issue 11, defects 1 and 2).

Every poison in :mod:`poison_app` becomes a recorded outcome of its job alone, with
a readable reason, and the jobs beside it in the batch are recorded once. The
worker runs on a thread so that a worker that would hang fails the test instead.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, NoReturn

import pytest

import poison_app
from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    JobContext,
    JobState,
    MailFathom,
)
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished, describe_error
from mailfathom.jobs.worker.worker import Worker
from mailfathom.testing import claim

_WITHIN = 30.0  # s a burst worker may take before the test calls it hung
_HUGE = ("ValueError: " + "x" * 5_000_000)[:3960] + "… [4996052 more characters]"

#: poison -> (error type, message) recorded for it; all are transient but one
EXPECTED: dict[str, tuple[str, str]] = {
    "base_exception": ("poison_app.Poison", "Poison: poisoned"),
    "system_exit": ("SystemExit", "SystemExit: 3"),
    "keyboard_interrupt": ("KeyboardInterrupt", "KeyboardInterrupt"),
    "generator_exit": ("GeneratorExit", "GeneratorExit"),
    "cancelled": ("asyncio.exceptions.CancelledError", "CancelledError: by the handler"),
    "group": ("BaseExceptionGroup", "BaseExceptionGroup: several (2 sub-exceptions)"),
    "str_raises": ("poison_app.BadStr", "BadStr: disk full (str() raised RuntimeError)"),
    "str_not_str": ("poison_app.NotStr", "NotStr: disk full (str() raised TypeError)"),
    "str_exits": ("poison_app.ExitingStr", "ExitingStr: disk full (str() raised SystemExit)"),
    "unprintable_args": ("ValueError", "ValueError: <unprintable: str() raised RuntimeError>"),
    "cause_raises": ("poison_app.BadCause", "BadCause: disk full"),
    "context_raises": ("poison_app.BadContext", "BadContext: disk full"),
    "traceback_lies": ("poison_app.BadTraceback", "BadTraceback: disk full"),
    "notes_raise": ("poison_app.BadNotes", "BadNotes: disk full"),
    "cyclic_cause": ("ValueError", "ValueError: first"),
    "nul_and_surrogate": ("ValueError", "ValueError: a\\x00b\\ud800c"),
    "huge_message": ("ValueError", _HUGE),
    "permanent_unprintable": (
        "mailfathom.jobs.failures.PermanentFailure",
        "<unprintable: str() raised RuntimeError>",
    ),
    "transient_without_init": ("poison_app.Lazy", "Lazy"),
}
PERMANENT = {"permanent_unprintable"}
assert set(EXPECTED) == set(poison_app.POISONS)


def drain(worker: Worker) -> int:
    """``worker.run(burst=True)`` on a thread; what it returns, or what it raised."""
    ended: list[Any] = []

    def run() -> None:
        try:
            ended.append(worker.run(burst=True))
        except BaseException as exc:  # handed to the test below
            ended.append(exc)

    thread = threading.Thread(target=run, name="poison-test-worker", daemon=True)
    thread.start()
    thread.join(_WITHIN)
    assert ended, f"the worker did not return within {_WITHIN} s: a job hangs, never recorded"
    if isinstance(ended[0], BaseException):  # not re-raised: it may be a poison itself
        error = ended[0]
        where = traceback.format_tb(BaseException.__dict__["__traceback__"].__get__(error))
        pytest.fail(f"the worker raised {type(error).__qualname__}:\n{''.join(where)}")
    count: int = ended[0]
    return count


def problems(mf: MailFathom, job_id: int, poison: str, *, frame: str) -> list[str]:
    """How the poisoned job's record differs from EXPECTED (nothing when it is right):
    its state, classification, reason, one Failed attempt with that error type and
    message, and a storable traceback that names the type and the handler's frame."""
    error_type, message = EXPECTED[poison]
    permanent = poison in PERMANENT
    expected = (
        JobState.DEAD_LETTERED if permanent else JobState.PENDING,
        FailureClass.PERMANENT if permanent else FailureClass.TRANSIENT,
        message,
        [(AttemptOutcome.FAILED, error_type, message)],
        True,
    )
    job = mf.jobs.get(job_id)
    attempts = mf.jobs.attempts(job_id)
    text = attempts[-1].traceback or "" if attempts else ""
    readable = (
        error_type.rsplit(".", 1)[-1] in text
        and frame in text
        and "\x00" not in text
        and len(text) <= 64_000
        and text.encode("utf-8", "replace").decode("utf-8") == text  # no lone surrogate
    )
    got = (
        job.state,
        job.failure_class,
        job.failure_reason,
        [(a.outcome, a.error_type, a.message) for a in attempts],
        readable,
    )
    return [] if got == expected else [f"{poison}: got {got!r}, expected {expected!r}"]


def check_siblings(mf: MailFathom, ids: list[int], ran: list[int]) -> None:
    """Each sibling ran once and is Succeeded with one attempt."""
    assert sorted(ran) == sorted(ids)
    for job_id in ids:
        assert mf.jobs.get(job_id).state is JobState.SUCCEEDED
        assert [a.outcome for a in mf.jobs.attempts(job_id)] == [AttemptOutcome.SUCCEEDED]


POISONS = sorted(EXPECTED)
BATCH = len(POISONS) + 2  # every poison and two siblings, claimed and recorded together


def test_poisoned_sync_handlers_are_recorded_alone(mf: MailFathom) -> None:
    barrier = threading.Barrier(BATCH, timeout=10)  # all end together: one batch
    ran: list[int] = []

    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        barrier.wait()
        ran.append(ctx.job_id)

    @mf.job("poisoned", max_attempts=2)
    def poisoned(ctx: JobContext, poison: str) -> NoReturn:
        barrier.wait()
        poison_app.raise_poison(ctx, poison)

    first = mf.enqueue("ok").id
    bad = {mf.enqueue("poisoned", {"poison": p}).id: p for p in POISONS}
    last = mf.enqueue("ok").id
    assert drain(mf.worker(concurrency=BATCH)) == BATCH
    wrong = [w for job_id, p in bad.items() for w in problems(mf, job_id, p, frame="raise_poison")]
    assert wrong == []
    check_siblings(mf, [first, last], ran)


@pytest.mark.parametrize("timeout", [None, 30], ids=["no_timeout", "timeout"])
def test_poisoned_async_handlers_are_recorded_alone(
    mf: MailFathom, caplog: pytest.LogCaptureFixture, timeout: int | None
) -> None:
    """Each poison is caught where the handler is awaited (run_async): none reaches the
    event loop, which would stop it (the runner would restart it, saying so). With a
    kind timeout and without one: run_async awaits the two in different scopes."""
    barrier = asyncio.Barrier(BATCH)
    ran: list[int] = []

    async def meet() -> None:
        async with asyncio.timeout(10):
            await barrier.wait()

    @mf.job("ok")
    async def ok(ctx: JobContext) -> None:
        await meet()
        ran.append(ctx.job_id)

    @mf.job("poisoned", max_attempts=2, timeout=timeout)
    async def poisoned(ctx: JobContext, poison: str) -> NoReturn:
        await meet()
        await poison_app.raise_poison_async(ctx, poison)

    first = mf.enqueue("ok").id
    bad = {mf.enqueue("poisoned", {"poison": p}).id: p for p in POISONS}
    last = mf.enqueue("ok").id
    with caplog.at_level(logging.ERROR, logger="mailfathom.jobs"):
        assert drain(mf.worker(concurrency=BATCH)) == BATCH
    frame = "raise_poison_async"
    wrong = [w for job_id, p in bad.items() for w in problems(mf, job_id, p, frame=frame)]
    assert wrong == []
    check_siblings(mf, [first, last], ran)
    escaped = [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]
    assert escaped == [], "a handler's own exception reached the event loop"


PROCESS_POISONS = [
    "base_exception",
    "system_exit",
    "keyboard_interrupt",
    "generator_exit",
    "str_raises",
    "str_exits",
    "cause_raises",
    "nul_and_surrogate",
]


@pytest.mark.slow
def test_poisoned_handlers_in_child_processes_are_recorded_alone(mf: MailFathom) -> None:
    mf.job("poisoned", isolation="process", max_attempts=2)(poison_app.raise_poison)
    mf.job("poisoned.async", isolation="process", max_attempts=2)(poison_app.raise_poison_async)
    mf.job("ok", isolation="process")(poison_app.fine)
    jobs = [(mf.enqueue("poisoned", {"poison": p}).id, p, "raise_poison") for p in PROCESS_POISONS]
    jobs += [
        (mf.enqueue("poisoned.async", {"poison": p}).id, p, "raise_poison_async")
        for p in ("system_exit", "keyboard_interrupt", "cancelled")
    ]
    sibling = mf.enqueue("ok")
    assert drain(mf.worker(concurrency=len(jobs) + 1)) == len(jobs) + 1
    assert [w for job_id, p, frame in jobs for w in problems(mf, job_id, p, frame=frame)] == []
    assert mf.jobs.get(sibling.id).state is JobState.SUCCEEDED


def _exit_later(ctx: JobContext) -> None:
    asyncio.get_running_loop().call_soon(sys.exit, 4)


def _stop_loop(ctx: JobContext) -> None:
    asyncio.get_running_loop().stop()


SABOTAGE: dict[str, Callable[[JobContext], None]] = {
    "exits_from_a_loop_callback": _exit_later,
    "stops_the_loop": _stop_loop,
}


def test_later_async_jobs_run_after_an_async_handler_exits(mf: MailFathom) -> None:
    """One worker, one slot: after each way of stopping the event loop, the next
    async job still runs (defect 2)."""
    ran: list[int] = []

    @mf.job("poisoned", max_attempts=2)
    async def poisoned(ctx: JobContext, poison: str) -> None:
        if poison in SABOTAGE:
            SABOTAGE[poison](ctx)
            return
        await poison_app.raise_poison_async(ctx, poison)

    @mf.job("ok")
    async def ok(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    poisons = ["system_exit", "keyboard_interrupt", "base_exception", *sorted(SABOTAGE)]
    bad: dict[int, str] = {}
    later: list[int] = []
    for poison in poisons:  # run in this order: each poison, then an async job
        bad[mf.enqueue("poisoned", {"poison": poison}).id] = poison
        later.append(mf.enqueue("ok").id)
    assert drain(mf.worker(concurrency=1)) == 2 * len(poisons)
    frame = "raise_poison_async"
    wrong = [
        w
        for job_id, p in bad.items()
        if p not in SABOTAGE
        for w in problems(mf, job_id, p, frame=frame)
    ]
    assert wrong == []
    sabotaged = [mf.jobs.get(job_id).state for job_id, p in bad.items() if p in SABOTAGE]
    assert sabotaged == [JobState.SUCCEEDED] * len(SABOTAGE)
    check_siblings(mf, later, ran)


LIMIT = timedelta(days=365)
BACKOFF = "retrying after the usual backoff"
#: retry_after -> (delay the job waits, or None for the kind's backoff; note in the reason)
RETRY_AFTERS: dict[str, tuple[timedelta | None, str | None]] = {
    "timedelta_max": (
        LIMIT,
        "retry_after 8.64e+13 s is over the 365-day limit: retrying in 365 days",
    ),
    "ten_thousand_years": (
        LIMIT,
        "retry_after 3.1536e+11 s is over the 365-day limit: retrying in 365 days",
    ),
    "huge_float": (LIMIT, "retry_after 1e+20 s is over the 365-day limit: retrying in 365 days"),
    "huge_int": (LIMIT, "retry_after 1e+30 s is over the 365-day limit: retrying in 365 days"),
    "inf": (LIMIT, "retry_after inf s is over the 365-day limit: retrying in 365 days"),
    "nan": (None, f"retry_after nan is not a number of seconds: {BACKOFF}"),
    "negative": (None, f"retry_after -5 s is negative: {BACKOFF}"),
    "negative_timedelta": (None, f"retry_after -5 s is negative: {BACKOFF}"),
    "text": (None, f"retry_after must be a timedelta or a number of seconds, not str: {BACKOFF}"),
    "bool": (None, f"retry_after must be a timedelta or a number of seconds, not bool: {BACKOFF}"),
    "list": (None, f"retry_after must be a timedelta or a number of seconds, not list: {BACKOFF}"),
    "a_year": (LIMIT, None),
}
assert set(RETRY_AFTERS) == set(poison_app.RETRY_AFTERS)


def test_absurd_retry_afters_are_bounded_and_said(mf: MailFathom, clock: FakeClock) -> None:
    ran: list[int] = []

    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    mf.job("slow")(poison_app.slow_down)
    first = mf.enqueue("ok").id
    bad = {mf.enqueue("slow", {"retry_after": name}).id: name for name in sorted(RETRY_AFTERS)}
    last = mf.enqueue("ok").id
    assert drain(mf.worker(concurrency=len(bad) + 2)) == len(bad) + 2
    wrong = []
    for job_id, name in bad.items():
        delay, note = RETRY_AFTERS[name]
        message = "slow down" if note is None else f"slow down ({note})"
        job = mf.jobs.get(job_id)
        attempts = [(a.error_type, a.message) for a in mf.jobs.attempts(job_id)]
        due = job.available_at
        if delay is None:  # the default backoff: at most 1 s after a first attempt
            on_time = due is not None and clock.now() <= due <= clock.now() + timedelta(seconds=1)
        else:
            on_time = due == clock.now() + delay
        got = (job.state, job.failure_class, job.failure_reason, attempts, on_time)
        expected = (
            JobState.PENDING,
            FailureClass.TRANSIENT,
            message,
            [("mailfathom.jobs.failures.TransientFailure", message)],
            True,
        )
        if got != expected:
            wrong.append(f"{name}: got {got!r}, expected {expected!r}")
    assert wrong == []
    check_siblings(mf, [first, last], ran)


def test_a_kinds_permanent_exception_that_cannot_print_dead_letters(mf: MailFathom) -> None:
    @mf.job("k", permanent=(poison_app.BadStr,))
    def fail(ctx: JobContext) -> NoReturn:
        poison_app.raise_poison(ctx, "str_raises")

    job = mf.enqueue("k")
    assert drain(mf.worker()) == 1
    dead = mf.jobs.get(job.id)
    assert (dead.state, dead.failure_class, dead.failure_reason) == (
        JobState.DEAD_LETTERED,
        FailureClass.PERMANENT,
        "BadStr: disk full (str() raised RuntimeError)",
    )


@pytest.fixture(scope="module")
def claimed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MailFathom, Job]]:
    """One claimed job on a SQLite app: failure() reads no store, so one store is enough."""
    path = tmp_path_factory.mktemp("failure") / "jobs.db"
    app = MailFathom(f"sqlite:///{path}", clock=FakeClock())
    app.migrate()
    app.job("k")(poison_app.fine)
    app.enqueue("k")
    (job,) = claim(app, "w", 1, timedelta(seconds=30))
    yield app, job
    app.close()


@pytest.mark.parametrize("poison", sorted(EXPECTED))
def test_describe_error_and_failure_never_raise(
    claimed: tuple[MailFathom, Job], poison: str
) -> None:
    app, job = claimed
    error = poison_app.make(poison)
    error_type, message = EXPECTED[poison]
    if poison not in PERMANENT:
        assert describe_error(error) == message
    # a Finished with nothing read yet, as a caller other than the runner may build it
    unread = Finished(job=job, outcome=AttemptOutcome.FAILED, error=error)
    failure = app.queue.failure(unread, app.clock.now())
    assert (failure.error_type, failure.message) == (error_type, message)
    assert failure.traceback is not None and "\x00" not in failure.traceback


def test_failure_of_a_malformed_result_is_still_an_attempt(claimed: tuple[MailFathom, Job]) -> None:
    app, job = claimed
    odd = Finished(job=job, outcome="Failed", error=poison_app.make("str_raises"))  # type: ignore[arg-type]
    failure = app.queue.failure(odd, app.clock.now())
    assert (failure.outcome, failure.failure_class, failure.message) == (
        "Failed",
        "Transient",
        "the failure could not be described (AttributeError while reading it); "
        "see the worker's log",
    )
    assert failure.retry_at is not None and failure.retry_at >= app.clock.now()

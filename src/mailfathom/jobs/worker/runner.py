"""Where handlers run: a pool of threads, one event loop thread, and child processes.

Internal. The worker hands each claimed job to :meth:`Runner.start`; the
handler runs on a pool thread (plain functions), on the runner's own event loop
(``async def``), or in a child process (``isolation="process"``, waited on by a
pool thread). When it ends, the runner calls the worker back with the
:class:`~mailfathom.jobs.queue.Finished` result, or None when the attempt was
stopped because the worker gave the job up. A pool thread whose plain attempt
ended asks the worker for the next one (``on_done_next``) and runs it itself, so
that back-to-back short jobs pass through no queue and wake no other thread.

Pool threads are daemon threads: a handler that never returns cannot keep the
process alive after the worker has given its job up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from mailfathom.clock import Clock
from mailfathom.jobs.context import AbortFlag
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished, describe_error
from mailfathom.jobs.registry import JobKind, Registry
from mailfathom.jobs.slots import positional_builder
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.jobs.worker.execute import failed, run_async, run_sync, unknown_kind
from mailfathom.jobs.worker.isolation import ChildProcesses
from mailfathom.observability import tracing
from mailfathom.observability.logs import log_fields

__all__ = ["Runner", "Running"]

logger = logging.getLogger(__name__)

Mode = Literal["thread", "async", "process", "none"]


class Cancellable(Protocol):
    """What stops an ``async def`` attempt: :meth:`cancel` cancels its task (any thread)."""

    def cancel(self) -> object:
        """Cancel the attempt's task."""


@dataclass(eq=False, slots=True)
class Running:
    """One attempt in progress on this worker."""

    job: Job
    kind: JobKind | None
    mode: Mode
    began: float  # time.monotonic() at submission
    started_at: datetime  # the clock's instant at submission
    deadline: float | None  # monotonic instant the kind's timeout falls, if any
    #: Set when the worker gave the job up (shutdown, lost lease): its result is dropped.
    abandoned: bool = False
    #: Set when the heartbeat found the lease gone: another worker may run the job now.
    lost: bool = False
    #: Set once the attempt overran its deadline and that was logged.
    overran: bool = False
    #: Set to stop an isolated attempt (its child is killed); only those have one, as an
    #: Event per plain attempt costs more than a no-op job.
    cancelled: threading.Event | None = None
    future: Cancellable | None = None
    #: Set (its ``reason``) when an operator aborts the attempt; the handler's ctx sees it.
    abort: AbortFlag = field(default_factory=AbortFlag)
    #: The attempt's OpenTelemetry span, when tracing is on (mailfathom.observability).
    span: Any = None

    def cancel(self) -> None:
        """Stop the attempt where that is possible: cancel a coroutine, kill a child process.

        A plain thread cannot be stopped; it runs on until its handler returns.
        """
        if self.cancelled is not None:
            self.cancelled.set()
        if self.future is not None:
            self.future.cancel()


_running = positional_builder(Running, defaults=False)


class Runner:
    """Runs handlers with at most ``size`` plain or isolated ones at once."""

    def __init__(
        self,
        registry: Registry,
        clock: Clock,
        *,
        size: int,
        worker_id: str,
        on_done: Callable[[Running, Finished | None], None],
        on_done_next: Callable[[Running, Finished], Running | None] | None = None,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._worker_id = worker_id
        self._on_done = on_done
        self._on_done_next = on_done_next
        self._pool = _DaemonPool(size, name=f"mailfathom-{worker_id}")
        self._children = ChildProcesses()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._closing = threading.Event()  # set when close() stops the loop
        self._lock = threading.Lock()
        #: ``async def`` attempts handed to the loop and not yet made tasks (under _lock):
        #: the loop is woken once for all of them, not once per attempt.
        self._arrivals: list[_AsyncAttempt] = []

    def prepare(self, job: Job) -> Running:
        """The record of ``job``'s attempt, before it starts (so callers can file it first)."""
        kind = self._registry.get(job.kind)
        mode: Mode
        if kind is None:
            mode = "none"
        elif kind.isolation == "process":
            mode = "process"
        elif kind.is_async:
            mode = "async"
        else:
            mode = "thread"
        began = time.monotonic()
        timeout = kind.timeout.total_seconds() if kind and kind.timeout is not None else None
        return _running(  # Running(job=…, kind=…, …) at half the cost: one per attempt
            job,
            kind,
            mode,
            began,
            self._clock.now(),
            began + timeout if timeout is not None else None,
            False,  # abandoned
            False,  # lost
            False,  # overran
            threading.Event() if mode == "process" else None,
            None,  # future
            AbortFlag(),
            None,  # span
        )

    def start(self, running: Running) -> None:
        """Start the attempt; ``on_done`` is called once, from whichever thread ends it."""
        kind, job = running.kind, running.job
        if kind is None:
            self._done(running, unknown_kind(job, running.started_at))
        elif running.mode == "process":
            self._pool.submit(lambda: self._isolated(running, kind))
        elif running.mode == "async":
            self._hand_to_loop(running, kind)
        else:
            task = lambda: self._threaded(running, kind)  # noqa: E731
            self._pool.submit(task if running.span is None else tracing.within(running.span, task))

    def _threaded(self, running: Running, kind: JobKind) -> None:
        """Run a plain attempt on this pool thread; then, while ``on_done_next`` hands
        this thread the next plain attempt (one claimed ahead, already filed as running),
        run that one here too: no queue, no other thread woken, per attempt."""
        while True:
            try:
                result = run_sync(kind, running.job, self._clock, running.abort)
            except BaseException as exc:  # a bug of ours: still an outcome, so the job ends
                logger.exception(
                    "job_id=%d: internal error running its handler",
                    running.job.id,
                    extra=log_fields("internal_error", job_id=running.job.id),
                )
                result = failed(running.job, exc, running.started_at)
            if self._on_done_next is None:
                self._done(running, result)
                return
            following = self._on_done_next(running, result)
            if following is None or following.kind is None:
                return
            running, kind = following, following.kind

    def _isolated(self, running: Running, kind: JobKind) -> None:
        try:
            assert running.cancelled is not None  # every isolated attempt has one
            result = self._children.run(kind, running.job, self._clock, running.cancelled)
        except BaseException as exc:  # starting the child failed in an unexpected way
            result = failed(running.job, exc, running.started_at)
        if result is not None:
            self._done(running, result)
        else:
            self._dropped(running)

    def _hand_to_loop(self, running: Running, kind: JobKind) -> None:
        """Queue an ``async def`` attempt for the event loop, which makes it a task.

        No future or thread-safe call per attempt: the attempts handed over while the
        loop is busy wait in one list, taken by one callback. The task ends by calling
        ``on_done`` on the loop's thread.
        """
        loop = self._event_loop()
        context = None
        if running.span is not None:
            with tracing.attached(running.span):  # the task runs in a copy of this context
                context = contextvars.copy_context()
        attempt = _AsyncAttempt(self, loop, running, kind, context)
        running.future = attempt
        with self._lock:
            self._arrivals.append(attempt)
            first = len(self._arrivals) == 1
        if first:
            loop.call_soon_threadsafe(self._take_arrivals)

    def _take_arrivals(self) -> None:
        """On the loop: make a task of every attempt handed over since the last call."""
        with self._lock:
            arrivals, self._arrivals = self._arrivals, []
        for attempt in arrivals:
            attempt.begin()

    def _async_done(self, running: Running, done: asyncio.Task[Finished]) -> None:
        if done.cancelled():
            self._dropped(running)
            return
        error = done.exception()
        if error is not None:  # not the handler's (run_async catches those): ours
            self._done(running, failed(running.job, error, running.started_at))
            return
        self._done(running, done.result())

    def _done(self, running: Running, result: Finished) -> None:
        self._on_done(running, result)

    def _dropped(self, running: Running) -> None:
        self._on_done(running, None)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._closing.clear()
                thread = threading.Thread(
                    target=self._serve,
                    args=(loop,),
                    name=f"mailfathom-loop-{self._worker_id}",
                    daemon=True,
                )
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the event loop until :meth:`close` stops it, whatever handlers do to it.

        A handler's own ``SystemExit`` never gets here (``run_async`` catches it),
        but one raised by a task or callback a handler started would stop the loop,
        and a handler may call ``loop.stop()``: either way the loop runs on, so
        that later ``async def`` jobs on this worker still run.
        """
        while True:
            try:
                loop.run_forever()
            except BaseException as exc:
                logger.error(
                    "worker=%s %s escaped onto the event loop (raised by a task or callback "
                    "an async handler started); the loop runs on",
                    self._worker_id,
                    describe_error(exc),
                    extra=log_fields(
                        "event_loop_error", worker=self._worker_id, error=describe_error(exc)
                    ),
                )
                continue
            if self._closing.is_set() or loop.is_closed():
                return
            logger.error(
                "worker=%s an async handler stopped the event loop; it runs on",
                self._worker_id,
                extra=log_fields("event_loop_stopped", worker=self._worker_id),
            )

    def kill_children(self) -> None:
        """SIGKILL every isolated attempt's process at once."""
        self._children.kill_all()

    def close(self, wait: float = 1.0) -> None:
        """Stop the pool's idle threads and the event loop (waiting up to ``wait`` s)."""
        self._pool.close()
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(_cancel_all, loop)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _has_tasks(loop):
            time.sleep(0.01)
        self._closing.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(max(deadline - time.monotonic(), 0.1))
        if not thread.is_alive():
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _has_tasks(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return bool(asyncio.all_tasks(loop))
    except RuntimeError:  # the set changed while we looked
        return True


def log_attempt(
    running: Running, result: Finished, worker_id: str, *, duration: float | None = None
) -> None:
    """One structured line per attempt, once its outcome is recorded; the traceback
    follows when it failed. ``duration``: how long it ran (default: until now)."""
    succeeded = result.outcome is AttemptOutcome.SUCCEEDED
    if not logger.isEnabledFor(logging.INFO if succeeded else logging.WARNING):
        return  # nothing would be written: skip building the line on the hot path
    job = running.job
    if duration is None:
        duration = time.monotonic() - running.began
    fields: dict[str, Any] = {
        "job_id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "attempt": job.attempts,
        "outcome": result.outcome.value,
        "duration": round(duration, 6),
        "worker": worker_id,
    }
    line = " ".join(f"{key}={value}" for key, value in fields.items())
    fields["action"] = "attempt"  # after the text: the line for people stays as it was
    if succeeded:
        logger.info("attempt %s", line, extra={"mailfathom": fields})
        return
    reason = result.message or (describe_error(result.error) if result.error is not None else "")
    fields["error"] = reason
    text = f"attempt {line} error={reason!r}"
    if result.traceback:
        text += "\n" + result.traceback.rstrip()
        fields["traceback"] = result.traceback
    logger.warning(text, extra={"mailfathom": fields})


class _AsyncAttempt:
    """One ``async def`` attempt on the runner's loop: its task once the loop made it.

    Ends exactly once: with its task's result, or — the moment :meth:`cancel` is
    called, on the caller's thread — as stopped (``on_done(running, None)``), its task
    cancelled on the loop and whatever it still returns ignored.
    """

    __slots__ = ("_context", "_ended", "_kind", "_loop", "_runner", "_running", "_task")

    def __init__(
        self,
        runner: Runner,
        loop: asyncio.AbstractEventLoop,
        running: Running,
        kind: JobKind,
        context: contextvars.Context | None,
    ) -> None:
        self._runner = runner
        self._loop = loop
        self._running = running
        self._kind = kind
        self._context = context
        self._task: asyncio.Task[Finished] | None = None
        self._ended = False

    def begin(self) -> None:
        """On the loop: start the attempt's task, unless it was cancelled meanwhile."""
        if self._ended:
            return
        running = self._running
        coroutine = run_async(self._kind, running.job, self._runner._clock, running.abort)
        task = self._loop.create_task(coroutine, context=self._context)
        self._task = task
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Finished]) -> None:
        if self._end():
            self._runner._async_done(self._running, task)
        elif not task.cancelled():
            task.exception()  # retrieved: a cancelled attempt's error is not "never retrieved"

    def _end(self) -> bool:
        with self._runner._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    def cancel(self) -> None:
        """Stop the attempt from any thread: it ends now, its task is cancelled on the loop."""
        if not self._end():
            return
        self._runner._dropped(self._running)
        with contextlib.suppress(RuntimeError):  # a closed loop: nothing runs any more
            self._loop.call_soon_threadsafe(self._cancel_task)

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()


class _DaemonPool:
    """A fixed-size pool of daemon threads, started as work arrives."""

    def __init__(self, size: int, *, name: str) -> None:
        self._size = size
        self._name = name
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` on an idle thread, starting one if none is idle."""
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                self._idle += 1
                thread.start()
            self._idle -= 1
        self._tasks.put(task)

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except BaseException:  # a bug of ours; the handler's own errors never get here
                logger.exception(
                    "internal error in a worker thread",
                    extra=log_fields("internal_error", thread=self._name),
                )
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Ask every thread to exit once it is idle (running handlers finish first)."""
        with self._lock:
            count = len(self._threads)
            self._threads = []
        for _ in range(count):
            self._tasks.put(None)

"""``isolation="process"``: a handler run in a child process that is killed at its deadline.

Internal. A thread cannot be stopped, so a kind that needs a hard stop runs each
attempt in a fresh child process. Children come from the ``forkserver`` start
method: each is forked from a small single-threaded server process that has
imported mailfathom once, so a child starts in milliseconds and inherits none of
the worker's threads, locks or connections. The handler and its payload are
pickled, so the handler must be a module-level function of an importable module. At the deadline
(or when the worker gives the job up: shutdown, a lost lease) the child is
killed with SIGKILL. The child ignores SIGINT and SIGTERM, which a terminal or
a service manager sends to the whole process group, so that the worker alone
decides when it stops; and it exits by itself if the worker disappears.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from multiprocessing.connection import Connection
from typing import Any

from mailfathom.clock import Clock
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.reasons import error_type, text_of, traceback_text
from mailfathom.jobs.registry import JobKind
from mailfathom.jobs.result import encode_returned
from mailfathom.jobs.worker.execute import context_for, failed, succeeded, timed_out

__all__ = ["ChildProcessDied", "ChildProcesses", "HandlerFailedInChild"]

_CHILDREN = multiprocessing.get_context("forkserver")
_CHILDREN.set_forkserver_preload(["mailfathom"])
_POLL = 0.05  # seconds between checks for the deadline and for cancellation
_START_LIMIT = 60.0  # seconds a child may take to start the handler (imports included)


class ChildProcessDied(Exception):
    """The child process running the handler exited without reporting a result."""

    # The error type attempts record (``mailfathom.jobs.isolation.ChildProcessDied``)
    # stays what the database already holds, wherever this module lives.
    __module__ = "mailfathom.jobs.isolation"


class HandlerFailedInChild(Exception):
    """Stands for an exception raised in the child that could not be sent back as itself."""

    __module__ = "mailfathom.jobs.isolation"  # the error type attempts record, as ever

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}" if message else error_type)
        self.error_type = error_type


class ChildProcesses:
    """Starts isolated attempts and remembers the live children, so that none outlives us."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[Any] = set()

    def run(
        self, kind: JobKind, job: Job, clock: Clock, cancelled: threading.Event
    ) -> Finished | None:
        """Run one attempt in a child and wait for it; None when ``cancelled`` was set first.

        Blocks the calling thread (a worker pool thread) until the child answers,
        dies, passes its deadline (killed: ``ExecutionTimeout``) or is cancelled
        (killed). The timeout counts from the moment the child starts the handler,
        so a slow start of the process is not charged to the handler.
        """
        started = clock.now()
        context = context_for(kind, job, started)
        receive, send = _CHILDREN.Pipe(duplex=False)
        process = _CHILDREN.Process(
            target=_child_main,
            args=(kind.handler, context, job.payload, send, (kind.name, kind.max_result_bytes)),
            name=f"mailfathom-job-{job.id}",
        )
        timeout = kind.timeout.total_seconds() if kind.timeout is not None else None
        limit = time.monotonic() + _START_LIMIT  # until the child says it started
        running = False
        try:
            try:
                process.start()
            except BaseException as exc:  # the handler or payload could not be pickled
                return failed(job, exc, started)
            finally:
                send.close()
            with self._lock:
                self._live.add(process)
            while True:
                if receive.poll(max(min(_POLL, limit - time.monotonic()), 0.0)):
                    message = _receive(receive)
                    if message is not None and message[0] == "started":
                        running = True
                        limit = time.monotonic() + timeout if timeout is not None else math.inf
                        continue
                    return _answer(message, process, job, started)
                if cancelled.is_set():
                    return None
                if time.monotonic() >= limit:
                    _kill(process)
                    if not running:
                        return failed(
                            job,
                            ChildProcessDied(
                                f"the child process did not start in {_START_LIMIT} s"
                            ),
                            started,
                        )
                    return timed_out(
                        job, kind.timeout, started, None, how="; its process was killed"
                    )
        finally:
            receive.close()
            _kill(process)
            with self._lock:
                self._live.discard(process)
            with contextlib.suppress(ValueError):
                process.close()

    def kill_all(self) -> None:
        """SIGKILL every live child (a worker exiting at once)."""
        with self._lock:
            live = list(self._live)
        for process in live:
            _kill(process)


def _receive(receive: Connection) -> Any:
    try:
        return receive.recv()
    except (EOFError, OSError):  # the child ended without a (complete) message
        return None


def _answer(message: Any, process: Any, job: Job, started: datetime) -> Finished:
    process.join(5)
    if message is None:
        code = process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return failed(
            job,
            ChildProcessDied(f"the handler's child process ended by {how} without a result"),
            started,
        )
    if message[0] == "ok":
        return succeeded(job, started, message[1])
    _, blob, error_type, text, tb = message
    error: BaseException = HandlerFailedInChild(error_type, text)
    if blob is not None:
        # our own child's bytes, over a pipe only it and we hold
        with contextlib.suppress(BaseException):  # an exception whose unpickling raises
            error = pickle.loads(blob)  # noqa: S301
    return failed(job, error, started, tb)


def _kill(process: Any) -> None:
    """SIGKILL the child and reap it; a child already reaped and closed by the thread
    that ran it (``kill_all`` races with that thread) is left alone."""
    try:
        if process.pid is None:
            return
        if process.exitcode is None:
            process.kill()
        process.join(5)
    except (OSError, ValueError):  # already gone, or already closed
        return


def _child_main(
    handler: Callable[..., Any],
    context: JobContext,
    payload: dict[str, Any],
    send: Connection,
    result_rule: tuple[str, int],
) -> None:
    """Runs in the child: the handler, then one message back to the worker (with what it
    returned as JSON text, made here: a value that cannot be is the attempt's error).
    ``result_rule``: the kind's name and its largest result, in bytes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit_with_worker(send.fileno())
    send.send(("started",))
    try:
        result = handler(context, **payload)
        if inspect.isawaitable(result):  # an async def handler
            result = asyncio.run(_awaited(result))
        kind, max_bytes = result_rule
        text = encode_returned(kind, result, max_bytes)
    except BaseException as exc:  # SystemExit, KeyboardInterrupt ... are failures too
        blob: bytes | None = None
        with contextlib.suppress(BaseException):  # whatever its pickling does
            packed = pickle.dumps(exc)
            pickle.loads(packed)  # noqa: S301 - checks that it comes back
            blob = packed
        send.send(("error", blob, error_type(exc), text_of(exc), traceback_text(exc)))
    else:
        send.send(("ok", text))
    send.close()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _exit_with_worker(pipe: int) -> None:
    """Exit when the worker is gone: the read end of our result pipe, which only the
    worker holds, closes, and Linux/BSD report that as an error on the write end.
    (The parent process is the fork server, which outlives the worker while we run.)"""

    def watch() -> None:
        poller = select.poll()
        poller.register(pipe, select.POLLERR | select.POLLHUP)
        while True:
            for _, events in poller.poll(500):
                if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    os._exit(1)

    threading.Thread(target=watch, name="mailfathom-worker-watch", daemon=True).start()

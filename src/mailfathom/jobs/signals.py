"""SIGTERM and SIGINT for a running worker: the first asks it to stop, a second exits.

Internal. Handlers are installed only on the main thread (Python delivers signals
there alone), and the previous handlers are put back when the worker returns, so
an application that embeds a worker keeps its own.

A worker process is told to stop at any moment, starting included (a deploy, a
supervisor that stops right after it started one): ``mailfathom worker`` calls
:func:`hold` first thing, which records SIGTERM/SIGINT until the worker (or the
supervisor) installs its own handlers and takes what was recorded
(:func:`take_held`): a worker stopped while it started exits 0 without claiming.
:func:`hold` also unblocks both signals, which a supervisor blocks in the worker
processes it starts, so that a signal sent before the interpreter ran any code
waits for the handler instead of killing the process.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "HardStop", "StopSignals", "hold", "release", "take_held"]

#: The signals that stop a worker.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_held: list[int] = []  # signals recorded by hold() that no handler has taken yet
_holding: dict[int, Any] = {}  # the handlers hold() replaced, while it holds


class HardStop(BaseException):
    """A second signal: leave now, recording nothing more."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopSignals:
    """Calls ``first(signum)`` on the first SIGTERM/SIGINT; raises :class:`HardStop`
    on the next one."""

    def __init__(self, first: Callable[[int], None]) -> None:
        self._first = first
        self._seen = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Take over both signals (only on the main thread; elsewhere nothing happens),
        then act on those :func:`hold` recorded before: the first stops, a second raises
        :class:`HardStop`."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._handle)
        for held in take_held():
            self._handle(held, None)

    def restore(self) -> None:
        """Put the handlers found by :meth:`install` back."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._seen += 1
        if self._seen > 1:
            raise HardStop(signum)
        self._first(signum)


def hold() -> None:
    """Record SIGTERM/SIGINT from now on, for the worker that starts (module docstring);
    a second one exits at once, with status 128 + its number. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        _holding.setdefault(signum, signal.signal(signum, _record))
    if hasattr(signal, "pthread_sigmask"):  # POSIX
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def take_held() -> list[int]:
    """The signals :func:`hold` recorded and nothing took yet (oldest first); forgets them."""
    taken = list(_held)
    del _held[: len(taken)]
    return taken


def release() -> None:
    """Undo :func:`hold` (a command that runs no worker): the handlers it replaced again,
    and a signal recorded meanwhile is delivered to them now. Without :func:`hold`
    (the command run inside another program), nothing changes."""
    if threading.current_thread() is not threading.main_thread() or not _holding:
        return
    for signum, handler in _holding.items():
        signal.signal(signum, handler)
    _holding.clear()
    for signum in take_held():
        os.kill(os.getpid(), signum)


def _record(signum: int, frame: FrameType | None) -> None:
    _held.append(signum)
    if len(_held) > 1:
        raise SystemExit(128 + signum)

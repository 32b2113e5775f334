"""SIGTERM and SIGINT for a running worker: the first asks it to stop, a second exits.

Internal. Handlers are installed only on the main thread (Python delivers signals
there alone), and the previous handlers are put back when the worker returns, so
an application that embeds a worker keeps its own.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["HardStop", "StopSignals"]


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
        """Take over both signals (only on the main thread; elsewhere nothing happens)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._handle)

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

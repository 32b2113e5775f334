"""A named event a part emits for tests to wait on, in the manner of River's
``rivershared/testsignal``.

Internal. A base module, so that any layer's parts (the worker's, the database
gauges') can own one; the worker's set is :class:`mailfathom.jobs.testsignal.WorkerSignals`.
Until a test calls :meth:`TestSignal.init` a signal is off and ``signal`` costs one
attribute read, so production pays nothing.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["DEFAULT_WAIT", "TestSignal"]

T = TypeVar("T")

#: Seconds a wait lasts unless told otherwise: long enough for a loaded CI machine.
DEFAULT_WAIT = 10.0


class TestSignal(Generic[T]):
    """One named event: off (a no-op) until :meth:`init`, then every value signalled is
    kept, in order, for :meth:`wait`."""

    __test__ = False  # not a pytest test class, whatever its name

    __slots__ = ("_values", "name")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._values: queue.SimpleQueue[T] | None = None

    def init(self) -> None:
        """Turn the signal on (tests only); values signalled before this are not kept."""
        self._values = queue.SimpleQueue()

    @property
    def on(self) -> bool:
        """Whether a test turned this signal on (check it before building a costly value)."""
        return self._values is not None

    def signal(self, value: T) -> None:
        """The event happened, with ``value``; does nothing unless :meth:`init` was called."""
        values = self._values
        if values is not None:
            values.put(value)

    def wait(self, timeout: float = DEFAULT_WAIT) -> T:
        """The next value signalled; fails the test when none comes within ``timeout`` s."""
        values = self._on()
        try:
            return values.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for test signal {self.name!r}"
            ) from None

    def wait_for(self, check: Callable[[T], bool], timeout: float = DEFAULT_WAIT) -> T:
        """The first value signalled for which ``check`` holds (earlier ones are consumed)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"timed out after {timeout:g}s waiting for test signal {self.name!r} "
                    "with the wanted value"
                )
            value = self.wait(left)
            if check(value):
                return value

    def require_empty(self) -> None:
        """Fail the test if a value was signalled and not waited for."""
        values = self._on()
        if not values.empty():
            raise AssertionError(
                f"test signal {self.name!r} fired unexpectedly: {values.get_nowait()!r}"
            )

    def _on(self) -> queue.SimpleQueue[T]:
        values = self._values
        if values is None:
            raise RuntimeError(f"test signal {self.name!r} is off: call init() first")
        return values

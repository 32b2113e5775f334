"""Named events a worker's parts emit for tests to wait on, in the manner of River's
``rivershared/testsignal``.

Internal. A part owns a few :class:`TestSignal` attributes and calls
:meth:`TestSignal.signal` at the moment something happens (a batch of outcomes
recorded, a lease lost, a job released). Until a test calls :meth:`TestSignal.init`
a signal is off and ``signal`` costs one attribute read, so production pays
nothing. A test enables the signals it needs, runs the code, then waits on each
with a timeout, instead of sleeping or polling the database::

    worker = mf.worker()
    worker.signals.init()
    ... start it ...
    released = worker.signals.released.wait()
"""

from __future__ import annotations

import dataclasses
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from mailfathom.jobs.flow.pacing import Load
from mailfathom.jobs.model import Job

__all__ = ["Recorded", "TestSignal", "WorkerSignals"]

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


@dataclass(frozen=True, slots=True)
class Recorded:
    """One batch of outcomes the store took: the ``(id, attempt)`` pairs it recorded,
    and the ids it refused because their lease had moved on."""

    recorded: tuple[tuple[int, int], ...]
    lost: frozenset[int]


@dataclass(frozen=True)
class WorkerSignals:
    """Every test signal of a worker and its parts; :meth:`init` turns them all on.

    - ``claimed``: a claim leased these jobs (empty claims are not signalled).
    - ``started``: an attempt of this job started.
    - ``batch_recorded``: a batch of outcomes was committed (:class:`Recorded`).
    - ``fallback_recorded``: ``(job, reason)`` — the job's own outcome could not be
      recorded, so the fallback outcome (Failed, transient) was.
    - ``left_to_lease``: ``(job, reason)`` — not even the fallback could be recorded; the
      job returns when its lease expires.
    - ``outcome_discarded``: the outcome of an attempt the worker had given up
      (shutdown timeout) arrived and was thrown away.
    - ``lease_lost``: the heartbeat found these ``(id, attempt)`` leases gone.
    - ``abort_seen``: the heartbeat brought an operator's abort request for this job,
      and the worker acted on it (cancelled, killed, or flagged for a thread).
    - ``released``: jobs claimed ahead that never started went back to Pending
      (late, or the worker stopped), no attempt spent.
    - ``loop_waits``: the main loop decided what to claim and record and is about to
      sleep; the value is the :class:`~mailfathom.jobs.flow.pacing.Load` it holds. A test
      that must show something does *not* happen waits for this instead of sleeping.
    - ``stopped``: ``run()`` is about to return; the value is how many attempts ran.
    """

    claimed: TestSignal[list[Job]] = field(default_factory=lambda: TestSignal("claimed"))
    started: TestSignal[Job] = field(default_factory=lambda: TestSignal("started"))
    batch_recorded: TestSignal[Recorded] = field(
        default_factory=lambda: TestSignal("batch_recorded")
    )
    fallback_recorded: TestSignal[tuple[Job, str]] = field(
        default_factory=lambda: TestSignal("fallback_recorded")
    )
    left_to_lease: TestSignal[tuple[Job, str]] = field(
        default_factory=lambda: TestSignal("left_to_lease")
    )
    outcome_discarded: TestSignal[Job] = field(
        default_factory=lambda: TestSignal("outcome_discarded")
    )
    lease_lost: TestSignal[set[tuple[int, int]]] = field(
        default_factory=lambda: TestSignal("lease_lost")
    )
    abort_seen: TestSignal[Job] = field(default_factory=lambda: TestSignal("abort_seen"))
    released: TestSignal[list[Job]] = field(default_factory=lambda: TestSignal("released"))
    loop_waits: TestSignal[Load] = field(default_factory=lambda: TestSignal("loop_waits"))
    stopped: TestSignal[int] = field(default_factory=lambda: TestSignal("stopped"))

    def init(self) -> WorkerSignals:
        """Turn every signal on (tests only); returns self."""
        for item in dataclasses.fields(self):
            getattr(self, item.name).init()
        return self

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
from dataclasses import dataclass, field

from mailfathom.jobs.model import Job
from mailfathom.jobs.worker.pacing import Load
from mailfathom.testsignal import DEFAULT_WAIT, TestSignal

__all__ = ["DEFAULT_WAIT", "Recorded", "TestSignal", "WorkerSignals"]


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
      sleep; the value is the :class:`~mailfathom.jobs.worker.pacing.Load` it holds. A test
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

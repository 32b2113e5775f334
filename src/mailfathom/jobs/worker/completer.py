"""The completer: records the outcomes of finished attempts, in batches (River's batch
completer).

Internal, one of the worker's three parts (with the
:class:`~mailfathom.jobs.worker.producer.Producer` that claims and the
:class:`~mailfathom.jobs.worker.executor.Executor` that runs). Finished attempts
wait here (their leases renewed by the heartbeat) until a batch records them, one
transaction each, through the :class:`~mailfathom.jobs.worker.recorder.OutcomeRecorder`
with all its handling of refused rows and outages. Where the batches are written
depends on the database:

- where it runs writers side by side (PostgreSQL: ``Store.parallel_writes``), on a
  thread of the completer's own, beside the claims: the producer's claim never waits
  for a completion's commit, and a completion never waits for the next claim. Batches
  form on their own: whatever finished while the previous batch was being committed
  goes in the next one;
- on SQLite, one writer at a time, in the producer's claim transaction
  (:meth:`Completer.claim`: one commit, one ``fsync``, for both), or on their own when
  the producer's pacing says so (:meth:`Completer.flush`).

Metrics, spans and the ``outcome=…`` log line of an attempt are told only after its
batch commits (:mod:`~mailfathom.jobs.worker.observed`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder

__all__ = ["Completer"]


class Completer:
    """Records what ``recorder`` holds: on a daemon thread of its own (``threaded``), as
    soon as it holds it, calling ``on_recorded`` after each batch (the worker's loop
    wakes up); otherwise in the claims and flushes the producer makes.

    Gives: :meth:`add` (the executor's, for each finished attempt), :meth:`claim`,
    :meth:`flush`, what waits (:meth:`jobs`, :meth:`waiting`, :meth:`age`) and
    :meth:`drain` at shutdown. Needs: the recorder and the worker's ``outage``.
    """

    def __init__(
        self,
        recorder: OutcomeRecorder,
        outage: Outage,
        *,
        name: str,
        on_recorded: Callable[[], None],
        threaded: bool = True,
    ) -> None:
        self._recorder = recorder
        self._unrecorded = recorder.unrecorded
        self._outage = outage
        self._on_recorded = on_recorded
        self._event = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: Records on a thread of its own (the producer's claims carry no outcomes).
        self.threaded = threaded

    # -- the executor's side -----------------------------------------------------------

    def add(self, result: Finished) -> None:
        """A finished attempt, to record (cheap: called under the executor's lock)."""
        self._unrecorded.add(result)
        if self.threaded and not self._event.is_set():
            self._event.set()

    # -- the producer's side -----------------------------------------------------------

    def claim(self, claim: Claim) -> list[Job] | None:
        """Make ``claim``, carrying the outcomes waiting in its transaction unless this
        completer records them on its own thread; see
        :meth:`~mailfathom.jobs.worker.recorder.OutcomeRecorder.record_and_claim`."""
        return self._recorder.record_and_claim(claim, carry=not self.threaded)

    def flush(self) -> None:
        """Record every waiting outcome now, in one transaction."""
        self._recorder.flush()

    def __len__(self) -> int:
        """How many finished attempts were handed in and not recorded yet."""
        return len(self._unrecorded)

    def age(self, now: float) -> float:
        """Seconds the oldest waiting outcome has waited (at ``now``, monotonic)."""
        return self._unrecorded.age(now)

    def empty(self) -> bool:
        """Nothing waits to be recorded, and no batch is being recorded."""
        return self._unrecorded.empty()

    def waiting(self) -> int:
        """How many finished attempts wait for their outcome to be recorded."""
        return len(self._unrecorded.waiting())

    def jobs(self) -> list[Job]:
        """The jobs whose outcomes wait: the heartbeat renews their leases meanwhile."""
        return self._unrecorded.jobs()

    # -- the thread --------------------------------------------------------------------

    def start(self) -> None:
        """Start recording (on its own thread, when it has one)."""
        if self.threaded:
            self._thread.start()

    def notify(self) -> None:
        """An outcome is waiting (cheap when the thread is already awake)."""
        if not self._event.is_set():
            self._event.set()

    def stop(self, wait: float) -> None:
        """Stop after the batch in flight (what still waits is the worker's to drain)."""
        self._stopping = True
        self._event.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(wait)

    def drain(self, give_up_after: float, wake: threading.Event) -> None:
        """Before the worker leaves: record what finished, retrying while the database
        fails for up to ``give_up_after`` seconds; see
        :meth:`~mailfathom.jobs.worker.recorder.OutcomeRecorder.drain`."""
        self._recorder.drain(give_up_after, wake)

    def _run(self) -> None:
        unrecorded = self._unrecorded
        while True:
            self._event.clear()
            if self._stopping:
                return
            if unrecorded and not self._outage.blocked_now():
                self._recorder.flush()
                self._on_recorded()
                continue
            # Nothing waits (a notify wakes us), or the database is left alone until then.
            timeout = max(self._outage.retry_at - time.monotonic(), 0.001) if unrecorded else None
            self._event.wait(timeout)

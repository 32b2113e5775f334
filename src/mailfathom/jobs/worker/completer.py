"""Recording outcomes on a thread of its own, beside the claims (River's batch completer).

Internal, one part of :class:`~mailfathom.jobs.worker.worker.Worker`, used where the
database runs writers side by side (PostgreSQL: ``Store.parallel_writes``). The
worker's loop then only claims, on one pooled connection, while this thread
writes the finished attempts on another: a claim never waits for a completion's
commit, and a completion never waits for the next claim. Batches form on their
own: whatever finished while the previous batch was being committed goes in the
next one (one transaction each, through
:meth:`~mailfathom.jobs.worker.recorder.OutcomeRecorder.flush`, with all its handling of
refused rows and outages).

On SQLite, one writer at a time, the loop carries the outcomes in its claim's
transaction instead (one commit, one ``fsync``, for both).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import OutcomeRecorder

__all__ = ["Completer"]


class Completer:
    """A daemon thread that records what ``recorder`` holds as soon as it holds it;
    ``on_recorded`` is called after each batch (the worker's loop wakes up)."""

    def __init__(
        self,
        recorder: OutcomeRecorder,
        outage: Outage,
        *,
        name: str,
        on_recorded: Callable[[], None],
    ) -> None:
        self._recorder = recorder
        self._outage = outage
        self._on_recorded = on_recorded
        self._event = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start recording."""
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

    def _run(self) -> None:
        unrecorded = self._recorder.unrecorded
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

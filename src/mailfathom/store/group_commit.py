"""Group commit: the small writes of many threads, committed together in one transaction.

Internal. Each delivery thread writes a few one-row changes per message (attempt
counted, TransmissionBegun, the answer). Committed one by one, every change pays
for its own commit — a disk flush on both databases — and the flushes, not the
SMTP traffic, bound how many messages a worker sends. Here the first thread to
arrive leads: it runs every write queued so far in one transaction and commits
once, while writes that arrive meanwhile queue for the next leader. A thread's
call still returns only after its own write is durable, so the order "committed
before the next step" that the outbox relies on is unchanged; only the flush is
shared. A batch that fails is retried write by write, each in its own
transaction, so one bad write never takes the others' results with it.

Used on SQLite, which lets one connection write at a time anyway. PostgreSQL
already shares WAL flushes between concurrent commits and runs many
connections' statements side by side, so there writes keep their own
transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

from mailfathom.errors import StoreError
from mailfathom.store.database import Cursor

__all__ = ["GroupCommit"]

T = TypeVar("T")


class _Pending(Generic[T]):
    __slots__ = ("done", "error", "result", "write")

    def __init__(self, write: Callable[[Cursor], T]) -> None:
        self.write = write
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Runs writes from any thread, sharing one transaction among those that overlap."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Cursor]]) -> None:
        self._transaction = transaction
        self._cond = threading.Condition()
        self._queue: list[_Pending[object]] = []
        self._leading = False

    def run(self, write: Callable[[Cursor], T]) -> T:
        """Run ``write`` in a transaction; return its result once that is committed."""
        pending: _Pending[T] = _Pending(write)
        with self._cond:
            self._queue.append(pending)  # type: ignore[arg-type]
            while self._leading and not pending.done:
                self._cond.wait()
            if not pending.done:
                self._leading = True
                batch, self._queue = self._queue, []
        if not pending.done:
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    for p in batch:  # only when the leader itself was interrupted
                        if not p.done:
                            p.error, p.done = _interrupted(), True
                    self._leading = False
                    self._cond.notify_all()
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[return-value]

    def _commit(self, batch: list[_Pending[object]]) -> None:
        if len(batch) > 1:
            a_write_failed = False
            try:
                with self._transaction() as cur:
                    results = []
                    for p in batch:
                        try:
                            results.append(p.write(cur))
                        except Exception:
                            a_write_failed = True
                            raise
            except Exception as exc:
                if not a_write_failed:
                    # BEGIN or COMMIT failed: every write shares that fate (a lost
                    # connection at COMMIT leaves it unknown, exactly as for one write).
                    for p in batch:
                        p.error, p.done = exc, True
                    return
            else:
                for p, result in zip(batch, results, strict=True):
                    p.result, p.done = result, True
                return
        # One write, or a batch that one write spoiled (all rolled back): one at a time.
        for p in batch:
            try:
                with self._transaction() as cur:
                    p.result = p.write(cur)
            except BaseException as exc:  # handed to the thread that asked for the write
                p.error = exc
            p.done = True


def _interrupted() -> StoreError:
    return StoreError("the write was not made: the thread committing it was interrupted; retry")

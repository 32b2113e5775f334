"""The jobs repository: enqueue, reads of jobs and their history, audited operator moves.

Internal. Runs the dialect's named queries (``jobs.sql``) on a
:class:`~mailfathom.store.database.Database`; a batch's flow-control keys are written
through :class:`~mailfathom.store.flow.repository.FlowClaims` in the enqueue's own
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from mailfathom.errors import StoreError
from mailfathom.store.base import (
    AttemptRow,
    EventRow,
    JobFilter,
    JobRow,
    NewJob,
    NewJobs,
    OperatorAction,
    ThroughputRow,
)
from mailfathom.store.database import Cursor, Database
from mailfathom.store.flow.repository import FlowClaims
from mailfathom.store.jobs.rows import JobRows

__all__ = ["JobsRepository", "batch_params"]


class JobsRepository:
    """Jobs: enqueue (one transaction per batch), reads, and audited operator moves."""

    def __init__(
        self,
        database: Database,
        *,
        flow: FlowClaims,
        rows: JobRows,
        enqueue_timeout: float | None = None,
    ) -> None:
        self.db = database
        #: The most seconds an enqueue waits for locks (None: as long as they are held).
        self.enqueue_timeout = enqueue_timeout
        self.flow = flow
        self._q = database.queries
        self._caps = database.capabilities
        self._job = rows.job

    # -- enqueue -----------------------------------------------------------------------

    def enqueue(
        self, batch: NewJobs, *, now: datetime, connection: object | None = None
    ) -> list[int | JobRow]:
        """Insert each job unless its key exists; one transaction for the whole batch.

        A dialect that defines ``insert_jobs`` inserts the batch in one statement
        (``insert_keyless_jobs`` when no job has a key: then, outside a caller's
        transaction, a statement that commits itself); otherwise each job is one
        ``insert_job``. Either way the jobs whose key already existed are then read in
        one ``jobs_by_keys`` statement. Each result is the new job's id, or the row of
        the job holding its key, in the order of the batch.
        """
        payloads = batch.payloads
        if not payloads:
            return []
        stamp = self.db.time_param(now)
        limits = batch.limit_keys
        if limits is not None and all(key is None for key in limits):
            limits = None
        timeout = self.enqueue_timeout if connection is None else None
        if connection is None and limits is None and timeout is None:
            if len(payloads) == 1:
                return [self._enqueue_one(batch.job(0), stamp)]
            if batch.idempotency_keys is None and self._caps.keyless_batch_insert:
                # One statement that commits itself (atomic all the same): one round trip
                # instead of three with BEGIN and COMMIT, and nothing else to read.
                with self.db.single_write() as cur:
                    return self._insert_batch(cur, batch, stamp)  # type: ignore[return-value]
        # In a caller's transaction the savepoint goes out with the insert (the writes
        # below read rows, never a rowcount): one round trip fewer.
        with self.db.transaction(
            connection, timeout=timeout, pipelined=connection is not None
        ) as cur:
            return self._enqueue_in(cur, batch, stamp)

    def enqueue_chunks(
        self,
        chunks: Iterable[NewJobs],
        *,
        now: datetime,
        connection: object | None = None,
        done: Callable[[NewJobs, list[int | JobRow]], None],
    ) -> None:
        """Insert a batch too large to hold at once, chunk after chunk, all in ONE
        transaction: ``chunks`` may validate each chunk as it is asked for, and whatever
        it raises (a bad item in the last chunk) rolls back every chunk written before.
        ``done`` receives each chunk with its results (as :meth:`enqueue` returns them)
        while the transaction is still open, so that no chunk is kept after its turn."""
        stamp = self.db.time_param(now)
        timeout = self.enqueue_timeout if connection is None else None
        with self.db.transaction(connection, timeout=timeout) as cur:
            for batch in chunks:
                if batch.payloads:
                    done(batch, self._enqueue_in(cur, batch, stamp))

    def _enqueue_in(self, cur: Cursor, batch: NewJobs, stamp: Any) -> list[int | JobRow]:
        """One batch inside an open transaction: its results in the order of the batch."""
        limits = batch.limit_keys
        if limits is not None and all(key is None for key in limits):
            limits = None
        if self._caps.batch_insert_returning_ids:  # ids only: the rows are the batch's values
            ids = self._insert_batch(cur, batch, stamp)
        else:
            ids = list(self._insert_each(cur, batch, stamp))
        if limits is not None:
            self.flow.set_keys(
                cur,
                [
                    (job_id, key)
                    for job_id, key in zip(ids, limits, strict=True)
                    if job_id is not None and key is not None
                ],
            )
        keys = batch.idempotency_keys
        if keys is None:  # nothing can have conflicted
            return ids  # type: ignore[return-value]
        taken = [key for job_id, key in zip(ids, keys, strict=True) if job_id is None]
        if not taken:
            return ids  # type: ignore[return-value]
        cur.execute(self._q["jobs_by_keys"], {"keys": self.db.list_param(taken)})
        existing = {row["idempotency_key"]: row for row in cur.fetchall()}
        results: list[int | JobRow] = []
        for job_id, key in zip(ids, keys, strict=True):
            if job_id is not None:
                results.append(job_id)
            elif key in existing:
                results.append(self._job(existing[key]))
            else:
                raise StoreError(
                    f"idempotency key {key!r} conflicted but its job is not visible (a "
                    "REPEATABLE READ transaction?): enqueue in READ COMMITTED"
                )
        return results

    def _enqueue_one(self, job: NewJob, now: Any) -> int | JobRow:
        """One job on its own: a single INSERT that commits itself (the common case, and
        the one whose cost is round trips). Only a taken key costs a second statement.
        Without a key, where the dialect has it, a plain ``insert_keyless_job``: nothing
        can conflict, so the server skips what ON CONFLICT costs."""
        with self.db.single_write() as cur:
            if job.idempotency_key is None and self._caps.keyless_batch_insert:
                cur.execute(
                    self._q["insert_keyless_job"],
                    {
                        "kind": job.kind,
                        "queue": job.queue,
                        "payload": job.payload,
                        "priority": job.priority,
                        "available_at": self.db.time_param(job.available_at),
                        "max_attempts": job.max_attempts,
                        "now": now,
                        "trace_context": job.trace_context,
                    },
                )
                new_id: int = cur.fetchone()["id"]
                return new_id
            (job_id,) = self._insert_each(cur, [job], now)
            if job_id is not None:
                return job_id
            cur.execute(self._q["job_by_key"], {"idempotency_key": job.idempotency_key})
            existing = cur.fetchone()
        if existing is None:  # pragma: no cover - the key's job was deleted in between
            raise StoreError(
                f"idempotency key {job.idempotency_key!r} conflicted but its job is gone: retry"
            )
        return self._job(existing)

    def _insert_each(
        self, cur: Cursor, jobs: NewJobs | Sequence[NewJob], now: Any
    ) -> Iterator[int | None]:
        """One ``insert_job_id`` per job, streamed: each new job's id, or None where its
        key already existed. Only the id is read back, and no job or row is kept, so a
        batch costs a few bytes per job here however large it is."""
        insert = self._q["insert_job_id"]
        if isinstance(jobs, NewJobs):  # what the batch shares is converted once
            params = {
                "kind": jobs.kind,
                "queue": jobs.queue,
                "priority": jobs.priority,
                "available_at": self.db.time_param(jobs.available_at),
                "max_attempts": jobs.max_attempts,
                "now": now,
                "trace_context": jobs.trace_context,
            }
            keys = jobs.idempotency_keys
            for index, payload in enumerate(jobs.payloads):
                params["payload"] = payload
                params["idempotency_key"] = None if keys is None else keys[index]
                cur.execute(insert, params)
                row = cur.fetchone()
                yield None if row is None else row["id"]
            return
        for job in jobs:
            cur.execute(
                insert,
                {
                    "kind": job.kind,
                    "queue": job.queue,
                    "payload": job.payload,
                    "priority": job.priority,
                    "idempotency_key": job.idempotency_key,
                    "available_at": self.db.time_param(job.available_at),
                    "max_attempts": job.max_attempts,
                    "now": now,
                    "trace_context": job.trace_context,
                },
            )
            row = cur.fetchone()
            yield None if row is None else row["id"]

    def _insert_batch(self, cur: Cursor, batch: NewJobs, now: Any) -> list[int | None]:
        """One statement for the whole batch: each new job's id, None where its key
        already existed. Nothing else is read back, parsed or converted per row."""
        params = batch_params(batch, now)
        params["available_at"] = self.db.time_param(batch.available_at)
        if batch.idempotency_keys is None:
            cur.execute(self._q["insert_keyless_jobs"], params)
            ids: list[int | None] = cur.fetchone()["ids"]
            if len(ids) != len(batch.payloads):  # pragma: no cover - a keyless row always goes in
                raise StoreError(f"{len(ids)} of {len(batch.payloads)} jobs were inserted")
            return ids
        cur.execute(self._q["insert_jobs"], params)
        row = cur.fetchone()
        inserted: list[int | None] = [None] * len(batch.payloads)
        for position, job_id in zip(row["positions"] or (), row["ids"] or (), strict=True):
            inserted[position - 1] = job_id
        return inserted

    # -- reads -------------------------------------------------------------------------

    def get_job(self, job_id: int) -> JobRow | None:
        """The job with ``job_id``, or None."""
        with self.db.reading() as cur:
            cur.execute(self._q["get_job"], {"id": job_id})
            row = cur.fetchone()
        return None if row is None else self._job(row)

    def list_jobs(
        self, filter: JobFilter, *, limit: int, before_id: int | None = None
    ) -> list[JobRow]:
        """Newest first, keyset-paginated: one constant SQL fragment per filter in use."""
        query, params = self.list_jobs_query(filter, limit=limit, before_id=before_id)
        with self.db.reading() as cur:
            cur.execute(query, params)
            return [self._job(row) for row in cur.fetchall()]

    def list_jobs_query(
        self, filter: JobFilter, *, limit: int, before_id: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The SQL and parameters :meth:`list_jobs` runs (benchmarks EXPLAIN it)."""
        params: dict[str, Any] = {"limit": limit}
        parts = [self._q["list_jobs"]]
        for name, value in (
            ("state", filter.state),
            ("kind", filter.kind),
            ("queue", filter.queue),
            ("text", None if filter.text is None else _like_pattern(filter.text)),
            ("created_before", self.db.time_param(filter.created_before)),
            ("created_after", self.db.time_param(filter.created_after)),
            ("before_id", before_id),
        ):
            if value is not None:
                parts.append(self._q[f"filter_{name}"])
                params[name] = value
        if filter.held:
            parts.append(self._q["filter_held"])
        parts.append(self._q["list_jobs_order"])
        return "\n".join(parts), params

    def count_jobs(self) -> dict[str, int]:
        """Jobs per state name."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_jobs"], {})
            return {row["state"]: int(row["n"]) for row in cur.fetchall()}

    def attempts(self, job_id: int) -> list[AttemptRow]:
        """Unsuccessful attempts, oldest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["job_attempts"], {"id": job_id})
            found = []
            for row in cur.fetchall():
                attempt: dict[str, Any] = dict(row)
                attempt.pop("id", None)
                attempt["started_at"] = self.db.time_value(attempt["started_at"])
                attempt["finished_at"] = self.db.time_value(attempt["finished_at"])
                found.append(attempt)
        return found  # type: ignore[return-value]

    def events(self, job_id: int) -> list[EventRow]:
        """Operator actions on the job, oldest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["job_events"], {"id": job_id})
            return self._event_rows(cur.fetchall())

    def recent_events(self, *, limit: int, before_id: int | None = None) -> list[EventRow]:
        """Every job's operator actions, newest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["recent_events"], {"limit": limit, "before_id": before_id})
            return self._event_rows(cur.fetchall())

    def _event_rows(self, rows: list[Any]) -> list[EventRow]:
        """Fetched ``mf_job_events`` rows with ``at`` as an aware datetime."""
        found = []
        for row in rows:
            event: dict[str, Any] = dict(row)
            event["at"] = self.db.time_value(event["at"])
            found.append(event)
        return found  # type: ignore[return-value]

    def count_held(self) -> int:
        """Jobs waiting for an operator's release."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_held"], {})
            return int(cur.fetchone()["n"])

    def throughput(self, *, since: datetime) -> list[ThroughputRow]:
        """Ended jobs per minute and final state, and failed attempts per minute."""
        stamp = self.db.time_param(since)
        found: list[ThroughputRow] = []
        with self.db.reading() as cur:
            for query in ("throughput_jobs", "throughput_failures"):
                cur.execute(self._q[query], {"since": stamp})
                found.extend(
                    ThroughputRow(minute=row["minute"], outcome=row["outcome"], n=int(row["n"]))
                    for row in cur.fetchall()
                )
        return found

    # -- operator moves ----------------------------------------------------------------

    def operator_move(
        self,
        job_id: int,
        move: OperatorAction,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[JobRow | None, JobRow | None]:
        """Perform ``move`` if the job is in one of its source states, with its audit row."""
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            cur.execute(self._q["get_job"], {"id": job_id})
            before = cur.fetchone()
            if before is None:
                return None, None
            abort = f"aborted by {actor}" + (f": {reason}" if reason else "")
            cur.execute(self._q[move.query], {"id": job_id, "now": stamp, "abort": abort})
            after = cur.fetchone()
            if after is None:
                return None, self._job(before)
            cur.execute(
                self._q["insert_event"],
                {
                    "job_id": job_id,
                    "at": stamp,
                    "actor": actor,
                    "action": move.action,
                    "from_state": before["state"],
                    "to_state": after["state"],
                    "reason": reason,
                },
            )
            return self._job(after), None


def batch_params(batch: NewJobs, now: Any) -> dict[str, Any]:
    """The ``insert_jobs`` / ``insert_keyless_jobs`` parameters: what the jobs share once,
    the payloads as one newline-joined text, the keys (if any) one array."""
    params: dict[str, Any] = {
        "kind": batch.kind,
        "queue": batch.queue,
        "payloads": "\n".join(batch.payloads),
        "priority": batch.priority,
        "available_at": batch.available_at,
        "max_attempts": batch.max_attempts,
        "trace_context": batch.trace_context,
        "now": now,
    }
    if batch.idempotency_keys is not None:
        params["keys"] = list(batch.idempotency_keys)
    return params


def _like_pattern(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere, its own wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"

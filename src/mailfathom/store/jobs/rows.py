"""Jobs as stored rows: the conversion every job repository shares.

Internal. A fetched ``mf_jobs`` row becomes a :class:`~mailfathom.store.base.JobRow`
through the :class:`~mailfathom.store.database.Database`'s value conversion (aware
instants, a parsed payload and result). The jobs, claims and schedules repositories each hold one.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from mailfathom.store.base import JobRow
from mailfathom.store.database import Database

__all__ = ["JobRows"]

_UNSEEN: Any = object()  # a stored instant not converted yet (see JobRows.jobs)

_JOB_TIMES = (
    "available_at",
    "lease_expires_at",
    "claimed_at",
    "created_at",
    "finished_at",
    "compacted_at",
)


class JobRows:
    """Converts fetched ``mf_jobs`` rows with one database's value conversion."""

    def __init__(self, database: Database) -> None:
        self.db = database

    def job(self, row: Any) -> JobRow:
        """One fetched ``mf_jobs`` row as a :class:`JobRow` (instants aware, payload parsed)."""
        job: dict[str, Any] = dict(row)
        for key in _JOB_TIMES:
            job[key] = self.db.time_value(job[key])
        job["payload"] = self.db.json_value(job["payload"])
        job["result"] = self.db.result_value(job["result"])
        return job  # type: ignore[return-value]

    def jobs(self, rows: Iterable[Any]) -> list[JobRow]:
        """Like ``job`` for many rows of one query (a claim's): the column names are read
        once, and each distinct stored instant is converted once. A batch shares most of
        them — every row of a claim has the same claim instant and lease expiry, an
        ``enqueue_many``'s rows the same creation and availability — and ``datetime``s
        are immutable, so rows may share them; each row still gets its own payload."""
        time_value = self.db.time_value
        json_value = self.db.json_value
        result_value = self.db.result_value
        seen: dict[Any, datetime | None] = {None: None}
        names: Any = None  # a tuple-like row's column names, read once for the batch
        jobs: list[JobRow] = []
        for row in rows:
            if isinstance(row, dict):
                job: dict[str, Any] = dict(row)
            else:  # sqlite3.Row: dict(row) looks each column up by name, three times slower
                if names is None:
                    names = row.keys()
                job = dict(zip(names, row, strict=True))
            for key in _JOB_TIMES:
                stored = job[key]
                moment = seen.get(stored, _UNSEEN)
                if moment is _UNSEEN:
                    moment = seen[stored] = time_value(stored)
                job[key] = moment
            job["payload"] = json_value(job["payload"])
            stored = job["result"]
            if stored is not None:  # a claim's rows never have one
                job["result"] = result_value(stored)
            jobs.append(job)  # type: ignore[arg-type]
        return jobs

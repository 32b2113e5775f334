"""Watching the database for the moment the last completion is durable.

A processing run ends when the database says so: a thread asks, every 25 ms, whether
any job of the system is unfinished (its own tables, a committed read from outside
the worker, ``LIMIT 1`` so it stays cheap) and notes when the answer is first "none".
A worker that returns only some time after its last commit (a shutdown wait, a
listener timeout) is not charged for it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import psycopg

from bench.databases import Target

__all__ = ["CompletionWatch"]

_INTERVAL = 0.025


class CompletionWatch:
    """Polls ``sql`` on ``target`` until it returns no row."""

    def __init__(self, target: Target, sql: str) -> None:
        self._target, self._sql = target, sql
        self._stop = threading.Event()
        self.finished_at: float | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Begin polling (call after the workers got ``go``)."""
        self._thread.start()

    def stop(self) -> float | None:
        """Stop polling; the moment no unfinished job was first seen, if it was."""
        self._stop.set()
        self._thread.join(10)
        return self.finished_at

    def _connect(self) -> Any:
        if self._target.dialect == "postgresql":
            return psycopg.connect(self._target.url, autocommit=True)
        assert self._target.path is not None
        return sqlite3.connect(self._target.path, isolation_level=None, timeout=30.0)

    def _run(self) -> None:
        try:
            conn = self._connect()
        except Exception as exc:  # reported by the caller, never hidden
            self.error = exc
            return
        try:
            while True:  # one more look after a stop request: the workers may be done
                stopping = self._stop.is_set()
                if conn.execute(self._sql).fetchone() is None:
                    self.finished_at = time.monotonic()
                    return
                if stopping:
                    return
                self._stop.wait(_INTERVAL)
        except Exception as exc:
            self.error = exc
        finally:
            conn.close()

"""Round trips counted in libpq's trace of a psycopg connection (PostgreSQL tests)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import pq

__all__ = ["round_trips", "traced"]


def round_trips(pgconn: Any, lines: list[str]) -> int:
    """Round trips in libpq's trace of a connection: the runs of messages the client
    sent before reading an answer (a run of "F" lines is one flight)."""
    sides = [line[0] for line in lines if line[:2] in ("F\t", "B\t")]
    return sum(1 for i, side in enumerate(sides) if side == "F" and sides[i - 1 : i] != ["F"])


@contextmanager
def traced(pgconn: Any) -> Iterator[list[str]]:
    """libpq's trace of ``pgconn`` while the block runs (its lines, filled at the end)."""
    lines: list[str] = []
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield lines
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines.extend(trace.read().decode().splitlines())

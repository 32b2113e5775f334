"""Which database guard refused a write: a CHECK (named by the columns it reads) or a trigger.

Tests that write impossible rows on purpose use this to assert not only that the write
was refused but by which guard, so a test meant for one CHECK cannot pass because
another one happened to fire. SQLite names a failed CHECK by its expression; PostgreSQL
by a generated constraint name, whose definition is read back from ``pg_constraint``.
Either way the guard is reported as the sorted columns its expression reads, the same
key tests/test_schema_shape.py counts CHECKs by.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
import pytest

from mailfathom import MailFathom, StoreError
from raw_database import raw_reading, raw_transaction

__all__ = ["check", "insert_row", "refused_by", "trigger"]

_WORD = re.compile(r"[a-z_][a-z0-9_]*")


def check(*columns: str) -> str:
    """The name :func:`refused_by` gives a CHECK reading exactly ``columns``."""
    return "check(" + ",".join(sorted(columns)) + ")"


def trigger(message: str) -> str:
    """The name :func:`refused_by` gives a trigger that raised ``message``."""
    return f"trigger: {message}"


def _columns(mf: MailFathom, table: str) -> set[str]:
    with raw_reading(mf) as cur:
        if mf.store.dialect == "sqlite":
            cur.execute(f"PRAGMA table_info({table})")
            return {row["name"] for row in cur.fetchall()}
        cur.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        )
        return {row["column_name"] for row in cur.fetchall()}


def _read(expression: str, columns: set[str]) -> str:
    text = re.sub(r"'[^']*'", "''", expression)  # literals are not columns
    return check(*(set(_WORD.findall(text.lower())) & columns))


def _guard(mf: MailFathom, table: str, error: StoreError) -> str:
    cause = error.__cause__
    if isinstance(cause, sqlite3.IntegrityError):
        message = str(cause)
        prefix = "CHECK constraint failed: "
        if message.startswith(prefix):
            return _read(message.removeprefix(prefix), _columns(mf, table))
        return trigger(message)
    if isinstance(cause, psycopg.errors.CheckViolation):
        name = cause.diag.constraint_name
        if name is None:  # a trigger's RAISE ... USING ERRCODE = 'check_violation'
            return trigger(cause.diag.message_primary or "")
        with raw_reading(mf) as cur:
            cur.execute(
                "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint "
                "WHERE conname = %s AND conrelid = %s::regclass",
                (name, table),
            )
            definition = cur.fetchone()["definition"]
        return _read(definition, _columns(mf, table))
    raise AssertionError(f"refused, but not by a CHECK or a trigger: {error!r} ({cause!r})")


def refused_by(mf: MailFathom, table: str, write: Callable[[Any], None]) -> str:
    """Run ``write(cursor)`` in a transaction that must fail; the guard that refused it."""
    with pytest.raises(StoreError) as refused, raw_transaction(mf) as cur:
        write(cur)
    return _guard(mf, table, refused.value)


def placeholders(mf: MailFathom, count: int) -> str:
    """``count`` positional placeholders in the store's parameter style."""
    mark = "?" if mf.store.dialect == "sqlite" else "%s"
    return ", ".join([mark] * count)


def insert_row(cur: Any, mf: MailFathom, table: str, row: Mapping[str, object]) -> Any:
    """INSERT ``row`` (column -> value) into ``table``, returning the new id."""
    names: Sequence[str] = list(row)
    cur.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders(mf, len(names))}) "
        "RETURNING id",
        [row[name] for name in names],
    )
    return cur.fetchone()["id"]

"""Numbered migration files per dialect, applied in order and recorded.

Internal. ``store/sql/<dialect>/migrations/NNNN_name.sql``; a database records
every applied version in ``mf_migrations`` and applies the rest under a lock,
so two processes migrating at once apply each file exactly once.
"""

from __future__ import annotations

import re
import sqlite3
from importlib import resources

__all__ = ["load_migrations", "split_statements"]

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


def load_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for every migration file of ``dialect``, in order."""
    folder = resources.files("mailfathom.store") / "sql" / dialect / "migrations"
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"{dialect} migrations must be numbered 1..n without gaps: {versions}")
    return found


def split_statements(script: str) -> list[str]:
    """Split an SQLite script into complete statements (comments and blanks dropped)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement at the end of a migration: {pending[:80]!r}")
    return statements

"""A fresh, empty database for every measurement, dropped afterwards.

PostgreSQL: ``CREATE DATABASE bench_<system>`` on the admin URL's server (never a
restart, never a setting changed: the server is shared). SQLite: a new folder under
the data directory, on the same disk as the repository (not a tmpfs, which would
make fsync free).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

__all__ = ["Target", "fresh_database", "postgres_problem"]

_NAME = re.compile(r"^[a-z0-9_]{1,60}$")


@dataclass(frozen=True)
class Target:
    """Where one measurement runs."""

    dialect: str
    url: str
    """The URL a driver connects to (``sqlite:///…`` for SQLite)."""
    path: str | None = None
    """The SQLite file, for drivers that take a path."""

    def spec(self) -> dict[str, str]:
        """The fields every driver spec carries."""
        fields = {"url": self.url}
        if self.path is not None:
            fields["path"] = self.path
        return fields


def _database_url(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def postgres_problem(admin_url: str) -> str | None:
    """Why PostgreSQL cannot be benchmarked, or None when it can."""
    try:
        with psycopg.connect(admin_url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL at {admin_url}: {exc}"
    return None


@contextmanager
def fresh_database(
    dialect: str, system_key: str, *, admin_url: str, data_dir: Path, prefix: str = "bench_"
) -> Iterator[Target]:
    """An empty database named ``<prefix><system_key>``; gone again on exit."""
    if dialect == "postgresql":
        name = prefix + system_key.replace("-", "_")
        if not _NAME.match(name):
            raise ValueError(f"not a safe database name: {name!r}")
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")
        try:
            yield Target("postgresql", _database_url(admin_url, name))
        finally:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{system_key}-", dir=data_dir))
    path = folder / "bench.db"
    try:
        yield Target("sqlite", f"sqlite:///{path}", str(path))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""What the PostgreSQL benchmarks share: the server URL and throw-away schemas.

``MAILFATHOM_TEST_POSTGRES_URL`` chooses the server (default: the local one).
Every benchmark works in a scratch schema of its own, dropped at the end, so it
never touches anyone's data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg

from mailfathom import MailFathom

__all__ = ["BASE_URL", "conditions", "quantile_ms", "schema_url", "scratch_schema"]

BASE_URL = os.environ.get(
    "MAILFATHOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def schema_url(schema: str, base: str = BASE_URL) -> str:
    """``base`` with ``search_path`` set to ``schema``."""
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def scratch_schema(label: str) -> Iterator[str]:
    """A migrated schema of its own (its name is yielded), dropped afterwards."""
    schema = f"mf_bench_{label}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with MailFathom(schema_url(schema)) as app:
            app.migrate()
        yield schema
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def quantile_ms(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values`` seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def conditions() -> str:
    """One line on the machine and server, to print with every result."""
    with psycopg.connect(BASE_URL) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"PostgreSQL {row[0] if row else '?'}; {os.cpu_count()} CPUs; load average {load}"

"""Server CPU of one one-row ``INSERT`` into ``mf_jobs``, and what each part of the table costs.

A single enqueue is one ``INSERT`` of one row, so whatever PostgreSQL does once per
statement is paid in full by every job. This runs ``--rows`` one-row inserts in a
PL/pgSQL loop (no client, no commit per row: only the statement) on schemas that differ
in one thing each, and reads the backend's CPU time from ``/proc/<pid>/stat``:

* ``as shipped``          — every migration;
* ``before 0019``         — the CHECKs as written before 0019 (lists as ``IN (...)``,
  length bounds as ``BETWEEN``);
* ``without CHECKs``      — every CHECK constraint of ``mf_jobs`` dropped;
* ``without NOTIFY``      — the statement-level ``NOTIFY`` trigger dropped;
* ``bare table``          — ``(id bigserial primary key, payload json)``.

PostgreSQL reads and prepares a table's CHECK expressions for every statement, so
their cost per one-row statement is far above what evaluating them costs.

    python -m bench.pg_insert_costs
    python -m bench.pg_insert_costs --rows 5000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg

from bench.pg_common import conditions, schema_url, scratch_schema
from mailfathom import MailFathom
from mailfathom.store.migrate import load_migrations

SETUPS = ("as shipped", "before 0019", "without CHECKs", "without NOTIFY", "bare table")

_JOB_LOOP = """DO $$ DECLARE t timestamptz := now(); BEGIN FOR i IN 1..{rows} LOOP
INSERT INTO mf_jobs (kind, queue, payload, priority, state, available_at, max_attempts,
                     created_at, trace_context)
VALUES ('bench.noop', 'default', ('{{"i": ' || i || '}}')::json, 0, 'Pending', t, 5, t, NULL);
END LOOP; END $$"""
_BARE_LOOP = """DO $$ BEGIN FOR i IN 1..{rows} LOOP
INSERT INTO bench_bare (payload) VALUES (('{{"i": ' || i || '}}')::json);
END LOOP; END $$"""
_DROP_CHECKS = """DO $$ DECLARE r record; BEGIN
FOR r IN SELECT conname FROM pg_constraint WHERE conrelid = 'mf_jobs'::regclass AND contype = 'c'
LOOP EXECUTE format('ALTER TABLE mf_jobs DROP CONSTRAINT %I', r.conname); END LOOP; END $$"""


def _prepare(setup: str, schema: str) -> None:
    """Make the scratch schema (migrated by :func:`scratch_schema`) into ``setup``."""
    with psycopg.connect(schema_url(schema), autocommit=True) as conn:
        if setup == "before 0019":  # migrated again from empty, up to the one before it
            conn.execute(_DROP_ALL_TABLES)
        elif setup == "without CHECKs":
            conn.execute(_DROP_CHECKS)
        elif setup == "without NOTIFY":
            conn.execute("DROP TRIGGER mf_jobs_notify ON mf_jobs")
        elif setup == "bare table":
            conn.execute("CREATE TABLE bench_bare (id bigserial PRIMARY KEY, payload json)")
    if setup == "before 0019":
        with MailFathom(schema_url(schema)) as app:
            app.store.db.apply_migrations(_before_lean_checks())


_DROP_ALL_TABLES = """DO $$ DECLARE r record; BEGIN
FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() LOOP
EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', r.tablename); END LOOP;
FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace LOOP
EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', r.f); END LOOP; END $$"""


def _before_lean_checks() -> list[tuple[int, str, str]]:
    """The PostgreSQL migrations before ``*_lean_job_checks.sql`` (0019), found by name."""
    migrations = load_migrations("postgresql")
    lean = next(v for v, name, _ in migrations if name.endswith("_lean_job_checks.sql"))
    return [m for m in migrations if m[0] < lean]


def _backend_seconds(pid: int) -> float:
    """CPU seconds (user + system) the server process ``pid`` has used."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _loop_runner(setup: str, rows: int) -> Iterator[Callable[[], float]]:
    """A function that runs the insert loop once on ``setup``: µs of server CPU per row."""
    with scratch_schema("inserts") as schema:
        _prepare(setup, schema)
        with psycopg.connect(schema_url(schema), autocommit=True) as conn:
            row: Any = conn.execute("SELECT pg_backend_pid()").fetchone()
            pid = int(row[0])
            loop = (_BARE_LOOP if setup == "bare table" else _JOB_LOOP).format(rows=rows)
            conn.execute(loop)  # warm: catalog caches, the PL/pgSQL function

            def run() -> float:
                before = _backend_seconds(pid)
                conn.execute(loop)
                return (_backend_seconds(pid) - before) / rows * 1e6

            yield run


def main(argv: list[str] | None = None) -> int:
    """Print the median µs of server CPU per one-row insert for each setup."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="inserts per run")
    parser.add_argument("--runs", type=int, default=3, help="runs per setup (interleaved)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.runs < 1:
        parser.error("--rows and --runs must be at least 1")
    print(conditions())
    figures: dict[str, list[float]] = {setup: [] for setup in SETUPS}
    with ExitStack() as stack:
        runners = {setup: stack.enter_context(_loop_runner(setup, args.rows)) for setup in SETUPS}
        for _ in range(args.runs):  # interleaved, so that load changes hit every setup alike
            for setup, run in runners.items():
                figures[setup].append(run())
    print(f"{'setup':<16} {'µs server CPU / insert':>24}   runs")
    for setup, values in figures.items():
        runs = " ".join(f"{value:.1f}" for value in values)
        print(f"{setup:<16} {statistics.median(values):>24.1f}   {runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The systems on the bench: mailfathom, its peers, and the plain-SQL ceilings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DJANGO_EMAIL", "EMAIL_DJANGO", "SYSTEMS", "WORKLOADS", "System", "select"]

Role = Literal["ours", "peer", "ceiling"]
Dialect = Literal["sqlite", "postgresql", "none"]
Venv = Literal["project", "peers", "django"]

WORKLOADS = ("enqueue_single", "enqueue_batch", "process", "latency", "rss")
EMAIL_DJANGO = frozenset({"email_django"})
"""Email through Django's ``send_mail`` / ``send_mass_mail`` (``bench.email_rows``)."""
_ALL = frozenset(WORKLOADS)
_SQL = frozenset({"enqueue_single", "enqueue_batch", "process"})
_MF_UNFINISHED = "SELECT 1 FROM mf_jobs WHERE state IN ('Pending', 'Claimed') LIMIT 1"
_CEILING_UNFINISHED = "SELECT 1 FROM jobs WHERE state <> 'done' LIMIT 1"


@dataclass(frozen=True)
class System:
    """One row of the table: what runs, on which database, in which environment."""

    key: str
    """Its name on the command line (``--systems``) and in database names."""
    label: str
    role: Role
    database: Dialect
    driver: str
    """The module under ``bench.drivers`` that drives it."""
    venv: Venv
    """``project``: this checkout's venv; ``peers``: ``bench/.peers/venv``; ``django``:
    ``bench/.peers/django-venv`` (the Django email peers)."""
    workloads: frozenset[str]
    processes: int = 1
    """Worker processes in the processing run."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extra spec fields for its driver (concurrency, batch size, ...)."""
    note: str = ""
    fill: str = "enqueue_batch"
    """The driver task that fills the queue before a processing run (untimed there)."""
    unfinished_sql: str | None = None
    """Returns a row while any job is not durably finished, so the harness can watch the
    last completion land (None: the system writes no completion)."""


SYSTEMS: tuple[System, ...] = (
    System(
        "mailfathom-sqlite",
        "mailfathom · SQLite",
        "ours",
        "sqlite",
        "mailfathom_driver",
        "project",
        _ALL,
        options={"concurrency": 10},
        note="worker(concurrency=10), synchronous=FULL",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-sqlite-async",
        "mailfathom · SQLite · async (aiosqlite)",
        "ours",
        "sqlite",
        "mailfathom_async_driver",
        "project",
        frozenset({"enqueue_single", "enqueue_batch"}),
        note="AsyncMailFathom, connection= the app's aiosqlite connection, a commit each",
    ),
    System(
        "mailfathom-pg-async",
        "mailfathom · PostgreSQL · async (psycopg)",
        "ours",
        "postgresql",
        "mailfathom_async_driver",
        "project",
        frozenset({"enqueue_single", "enqueue_batch"}),
        note="AsyncMailFathom, connection= the app's psycopg AsyncConnection, a commit each",
    ),
    System(
        "mailfathom-sqlite-4",
        "mailfathom · SQLite · 4 processes",
        "ours",
        "sqlite",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        processes=4,
        options={"concurrency": 10},
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-pg",
        "mailfathom · PostgreSQL",
        "ours",
        "postgresql",
        "mailfathom_driver",
        "project",
        _ALL,
        options={"concurrency": 10},
        note="worker(concurrency=10)",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-pg-4",
        "mailfathom · PostgreSQL · 4 processes",
        "ours",
        "postgresql",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        processes=4,
        options={"concurrency": 10},
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-sqlite-p4",
        "mailfathom · SQLite · worker --processes 4",
        "ours",
        "sqlite",
        "mailfathom_cli_driver",
        "project",
        frozenset({"process"}),
        options={"concurrency": 10, "cli_processes": 4},
        note="the real CLI: mailfathom worker --processes 4 --burst (timed from the first job)",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-pg-p4",
        "mailfathom · PostgreSQL · worker --processes 4",
        "ours",
        "postgresql",
        "mailfathom_cli_driver",
        "project",
        frozenset({"process"}),
        options={"concurrency": 10, "cli_processes": 4},
        note="the real CLI: mailfathom worker --processes 4 --burst (timed from the first job)",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-sqlite-limited",
        "mailfathom · SQLite · max_running=10",
        "ours",
        "sqlite",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        options={"concurrency": 10, "max_running": 10},
        note="worker(concurrency=10), the kind limited fleet-wide to max_running=10",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-pg-limited",
        "mailfathom · PostgreSQL · max_running=10",
        "ours",
        "postgresql",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        options={"concurrency": 10, "max_running": 10},
        note="worker(concurrency=10), the kind limited fleet-wide to max_running=10",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-sqlite-c50",
        "mailfathom · SQLite · concurrency 50",
        "ours",
        "sqlite",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        options={"concurrency": 50},
        note="worker(concurrency=50): claims and completions in batches of up to 50",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "mailfathom-pg-4-c50",
        "mailfathom · PostgreSQL · 4 processes · concurrency 50",
        "ours",
        "postgresql",
        "mailfathom_driver",
        "project",
        frozenset({"process"}),
        processes=4,
        options={"concurrency": 50},
        note="4 x worker(concurrency=50)",
        unfinished_sql=_MF_UNFINISHED,
    ),
    System(
        "pgqueuer-asyncpg",
        "PgQueuer · asyncpg",
        "peer",
        "postgresql",
        "pgqueuer_driver",
        "peers",
        _ALL,
        options={"driver": "asyncpg", "batch": 100},
        note="batch_size=100, uvloop",
        unfinished_sql="SELECT 1 FROM pgqueuer LIMIT 1",
    ),
    System(
        "pgqueuer-psycopg",
        "PgQueuer · psycopg",
        "peer",
        "postgresql",
        "pgqueuer_driver",
        "peers",
        _ALL,
        options={"driver": "psycopg", "batch": 100},
        note="batch_size=100, uvloop",
        unfinished_sql="SELECT 1 FROM pgqueuer LIMIT 1",
    ),
    System(
        "procrastinate",
        "procrastinate",
        "peer",
        "postgresql",
        "procrastinate_driver",
        "peers",
        _ALL,
        options={"concurrency": 10},
        note="concurrency=10, async task",
        unfinished_sql=(
            "SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing') LIMIT 1"
        ),
    ),
    System(
        "huey",
        "huey · SqliteHuey",
        "peer",
        "sqlite",
        "huey_driver",
        "peers",
        _ALL - {"enqueue_batch"},
        options={"workers": 4},
        note="4 threads; no batch enqueue; no completion write",
        fill="fill",
    ),
    System(
        "ceiling-pg",
        "ceiling · PostgreSQL SKIP LOCKED",
        "ceiling",
        "postgresql",
        "ceiling_postgres",
        "project",
        _SQL,
        options={"batch": 100},
        note="plain SQL, batch 100",
        unfinished_sql=_CEILING_UNFINISHED,
    ),
    System(
        "ceiling-pg-4",
        "ceiling · PostgreSQL · 4 processes",
        "ceiling",
        "postgresql",
        "ceiling_postgres",
        "project",
        frozenset({"process"}),
        processes=4,
        options={"batch": 100},
        unfinished_sql=_CEILING_UNFINISHED,
    ),
    System(
        "ceiling-sqlite",
        "ceiling · SQLite WAL FULL",
        "ceiling",
        "sqlite",
        "ceiling_sqlite",
        "project",
        _SQL,
        options={"batch": 100},
        note="plain SQL, batch 100, synchronous=FULL",
        unfinished_sql=_CEILING_UNFINISHED,
    ),
)


def _django(key: str, label: str, system: str, database: Dialect, **options: Any) -> System:
    """A row of the ``email_django`` workload: ``system`` behind Django's email API."""
    ours = system == "mailfathom"
    return System(
        key,
        label,
        "ours" if ours else "peer",
        database,
        "django_email_driver",
        "project" if ours else "django",
        EMAIL_DJANGO,
        options={"system": system, **options},
        note=(
            "Django send_mail / send_mass_mail, then manage.py mailfathom worker --burst"
            if ours
            else f"Django send_mail / send_mass_mail, then {options.get('sender', '')}"
        ),
    )


_DATABASES: tuple[tuple[Dialect, str, str], ...] = (
    ("sqlite", "SQLite", "sqlite"),
    ("postgresql", "PostgreSQL", "pg"),
)
DJANGO_EMAIL: tuple[System, ...] = tuple(
    row
    for database, name, suffix in _DATABASES
    for row in (
        _django(f"mailfathom-django-{suffix}", f"mailfathom · {name} · Django backend",
                "mailfathom", database),
        _django(f"django-mailer-{suffix}", f"django-mailer · {name}", "django-mailer", database,
                sender="send_all()"),
        _django(f"post-office-{suffix}", f"django-post_office · {name}", "django-post_office",
                database, processes=1, sender="send_queued_mail_until_done(processes=1)"),
        _django(f"post-office-p2-{suffix}", f"django-post_office · {name} · 2 processes",
                "django-post_office", database, processes=2,
                sender="send_queued_mail_until_done(processes=2)"),
    )
)  # fmt: skip
"""The ``email_django`` rows: mailfathom's Django backend and the durable Django email
queues a Django team would pick, each on both databases. django-post_office runs in
its default mode (``manage.py send_queued_mail``: one process) and in its fastest
documented one (``--processes 2``: one per core here)."""


def select(keys: str | None, *, peers: bool) -> list[System]:
    """The systems named in ``keys`` (comma-separated), or all; without peers if asked."""
    chosen = [*SYSTEMS, *DJANGO_EMAIL]
    if keys:
        wanted = [key.strip() for key in keys.split(",") if key.strip()]
        known = {system.key for system in chosen}
        unknown = [key for key in wanted if key not in known]
        if unknown:
            raise SystemExit(
                f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}"
            )
        chosen = [system for system in chosen if system.key in wanted]
    if not peers:
        chosen = [system for system in chosen if system.venv == "project"]
    return chosen

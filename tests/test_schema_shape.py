"""Migrating from empty gives the expected schema on each dialect, in its own catalog's terms.

Each database is described the same way — per table: columns (nullable or not,
and the dialect's own type), primary key, unique column sets, which columns each
CHECK constraint reads, foreign keys, the secondary indexes with their key order
and partial predicate, and the triggers — from ``sqlite_master``/``PRAGMA`` on
SQLite and from ``pg_catalog``/``information_schema`` on PostgreSQL. The job
tables must match what is written here, and both dialects must describe every
table identically apart from the column types (plus the few differences each
dialect needs, named where they are allowed).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from mailfathom import MailFathom
from mailfathom.store.migrate import load_migrations
from raw_database import raw_reading

# column: (nullable, SQLite type, PostgreSQL type)
JOBS_COLUMNS = {
    "id": (False, "INTEGER", "bigint"),
    "kind": (False, "TEXT", "text"),
    "queue": (False, "TEXT", "text"),
    "payload": (False, "TEXT", "json"),
    "priority": (False, "INTEGER", "integer"),
    "state": (False, "TEXT", "text"),
    "idempotency_key": (True, "TEXT", "text"),
    "available_at": (True, "TEXT", "timestamp with time zone"),
    "attempts": (False, "INTEGER", "integer"),
    "attempt_base": (False, "INTEGER", "integer"),
    "max_attempts": (False, "INTEGER", "integer"),
    "lease_owner": (True, "TEXT", "text"),
    "lease_expires_at": (True, "TEXT", "timestamp with time zone"),
    "claimed_by": (True, "TEXT", "text"),
    "claimed_at": (True, "TEXT", "timestamp with time zone"),
    "failure_class": (True, "TEXT", "text"),
    "failure_reason": (True, "TEXT", "text"),
    "created_at": (False, "TEXT", "timestamp with time zone"),
    "finished_at": (True, "TEXT", "timestamp with time zone"),
    "compacted_at": (True, "TEXT", "timestamp with time zone"),
    "abort_reason": (True, "TEXT", "text"),  # operator controls
    "snoozes": (False, "INTEGER", "integer"),
    "trace_context": (True, "TEXT", "text"),
    "limit_key": (True, "TEXT", "text"),  # flow control (0011)
    "result": (True, "TEXT", "json"),  # what the handler returned (0015)
}
JOBS_CHECKS = Counter(
    {
        ("kind",): 1,
        ("queue",): 1,
        ("payload",): 1,
        ("state",): 1,
        ("attempts",): 1,
        ("attempt_base", "attempts"): 1,
        ("max_attempts",): 1,
        ("failure_class",): 1,
        ("finished_at", "state"): 1,
        ("lease_expires_at", "lease_owner", "state"): 1,
        ("lease_expires_at", "lease_owner"): 1,
        ("failure_class", "failure_reason", "state"): 1,
        ("attempt_base", "attempts", "state"): 1,
        ("compacted_at", "state"): 1,  # retention: only a terminal row is compacted
        ("compacted_at", "payload"): 1,  # and a compacted row has no payload
        ("snoozes",): 1,
        ("trace_context",): 1,
        ("limit_key",): 1,
        ("result",): 1,  # JSON, never the JSON null (None stores NULL)
        ("result", "state"): 1,  # only a Succeeded job has a result
        ("compacted_at", "result"): 1,  # and a compacted row has none
    }
)
# Every CHECK of the outbox tables (both dialects; SQLite adds its 0/1 stand-ins for booleans).
# Two CHECKs read (stage, transmission_begun_at): TransmissionBegun/Sent have the instant,
# Recorded/Cancelled do not; tests/test_schema.py refuses a row with each.
OUTBOX_CHECKS = Counter(
    {
        ("stage",): 1,
        ("message_id",): 1,
        ("attempts",): 1,
        ("reply_code",): 1,
        ("message", "size"): 1,
        ("finished_at", "stage"): 1,
        ("stage", "transmission_begun_at"): 2,
        ("reason", "stage"): 1,
        ("body_transmissions",): 1,  # never below 0 (0005)
        ("body_transmissions", "stage"): 1,  # Cancelled only if no body ever went out (0005)
        ("compacted_at", "stage"): 1,  # retention: only a final record is compacted
        ("compacted_at", "message"): 1,  # its bytes are empty exactly when compacted
    }
)
SQLITE_BOOLEAN_CHECKS = Counter({("smtputf8",): 1, ("eightbit",): 1})
OUTBOX_RECIPIENTS_CHECKS = Counter(
    {("position",): 1, ("address",): 1, ("reply_code",): 1, ("replied_at", "reply_code"): 1}
)
OUTBOX_EVENTS_CHECKS = Counter({("actor",): 1})
PENDING_DUE = "state='pending' and available_at is not null"
JOBS_INDEXES = {
    "mf_jobs_claimable": (("priority DESC", "available_at", "id"), PENDING_DUE),
    "mf_jobs_queue_claimable": (("queue", "priority DESC", "available_at", "id"), PENDING_DUE),
    "mf_jobs_leases": (("lease_expires_at",), "state='claimed'"),
    "mf_jobs_state": (("state", "id"), None),
    "mf_jobs_kind": (("kind", "id"), None),
    "mf_jobs_compactable": (
        ("state", "finished_at"),
        "compacted_at is null and finished_at is not null",
    ),
}


def describe(mf: MailFathom) -> dict[str, dict[str, Any]]:
    """Every ``mf_`` table of the app's database, described in dialect-neutral terms."""
    with raw_reading(mf) as cur:
        if mf.store.dialect == "sqlite":
            return _describe_sqlite(cur)
        return _describe_postgres(cur)


# -- SQLite ---------------------------------------------------------------------------


def _describe_sqlite(cur: Any) -> dict[str, dict[str, Any]]:
    cur.execute(
        "SELECT name, sql FROM sqlite_master "
        "WHERE type = 'table' AND name LIKE 'mf\\_%' ESCAPE '\\'"
    )
    tables = {row["name"]: row["sql"] for row in cur.fetchall()}
    described = {}
    for table, sql in tables.items():
        cur.execute(f"PRAGMA table_info({table})")
        info = cur.fetchall()
        columns = {r["name"]: (not r["notnull"] and not r["pk"], r["type"]) for r in info}
        primary = tuple(r["name"] for r in sorted(info, key=lambda r: r["pk"]) if r["pk"])
        unique, indexes = set(), {}
        cur.execute(f"PRAGMA index_list({table})")
        for index in cur.fetchall():
            cur.execute(f"PRAGMA index_xinfo({index['name']})")
            keys = [r for r in cur.fetchall() if r["key"]]
            if index["origin"] == "pk":  # a TEXT primary key's own index: that is `primary`
                continue
            if index["origin"] == "u":
                unique.add(tuple(r["name"] for r in keys))
                continue
            cur.execute("SELECT sql FROM sqlite_master WHERE name = ?", (index["name"],))
            index_sql = cur.fetchone()["sql"]
            where = index_sql.split(" WHERE ", 1)[1] if " WHERE " in index_sql else None
            order = tuple(r["name"] + (" DESC" if r["desc"] else "") for r in keys)
            indexes[index["name"]] = (order, _predicate(where))
        cur.execute(f"PRAGMA foreign_key_list({table})")
        foreign = {(r["from"], r["table"], r["to"], r["on_delete"].upper()) for r in cur.fetchall()}
        cur.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,)
        )
        described[table] = {
            "columns": columns,
            "primary": primary,
            "unique": unique,
            "checks": _sqlite_checks(sql, set(columns)),
            "foreign": foreign,
            "indexes": indexes,
            "triggers": {r["name"] for r in cur.fetchall()},
        }
    return described


def _sqlite_checks(create_sql: str, columns: set[str]) -> Counter[tuple[str, ...]]:
    """The columns each CHECK (...) of a CREATE TABLE reads (comments and literals ignored)."""
    text = re.sub(r"--[^\n]*", "", create_sql)
    text = re.sub(r"'[^']*'", "''", text)
    found: Counter[tuple[str, ...]] = Counter()
    for match in re.finditer(r"\bCHECK\s*\(", text, re.IGNORECASE):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        words = set(re.findall(r"[a-z_][a-z0-9_]*", text[match.end() : end - 1]))
        found[tuple(sorted(words & columns))] += 1
    return found


# -- PostgreSQL -----------------------------------------------------------------------


def _describe_postgres(cur: Any) -> dict[str, dict[str, Any]]:
    cur.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name LIKE 'mf\\_%'"
    )
    described = {}
    for (table,) in (tuple(r.values()) for r in cur.fetchall()):
        cur.execute(
            "SELECT column_name, is_nullable, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        )
        columns = {
            r["column_name"]: (r["is_nullable"] == "YES", r["data_type"]) for r in cur.fetchall()
        }
        cur.execute(
            "SELECT i.indisprimary AS pk, i.indisunique AS uq, c.relname AS name, "
            "  pg_get_expr(i.indpred, i.indrelid) AS pred, "
            "  array(SELECT a.attname || CASE WHEN i.indoption[k.n - 1] & 1 = 1 "
            "                                 THEN ' DESC' ELSE '' END "
            "        FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
            "        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "        ORDER BY k.n) AS keys "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s::regclass",
            (table,),
        )
        primary: tuple[str, ...] = ()
        unique, indexes = set(), {}
        for r in cur.fetchall():
            if r["pk"]:
                primary = tuple(r["keys"])
            elif r["uq"]:
                unique.add(tuple(r["keys"]))
            else:
                indexes[r["name"]] = (tuple(r["keys"]), _predicate(r["pred"]))
        cur.execute(
            "SELECT contype, confdeltype, confrelid::regclass::text AS target, "
            "  array(SELECT attname FROM pg_attribute "
            "        WHERE attrelid = conrelid AND attnum = ANY(conkey) ORDER BY attname) AS cols, "
            "  array(SELECT attname FROM pg_attribute "
            "        WHERE attrelid = confrelid AND attnum = ANY(confkey)) AS target_cols "
            "FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('c', 'f')",
            (table,),
        )
        checks: Counter[tuple[str, ...]] = Counter()
        foreign = set()
        actions = {"c": "CASCADE", "a": "NO ACTION", "r": "RESTRICT", "n": "SET NULL"}
        for r in cur.fetchall():
            if r["contype"] == "c":
                checks[tuple(r["cols"])] += 1
            else:
                (col,), (to,) = r["cols"], r["target_cols"]
                foreign.add((col, r["target"], to, actions[r["confdeltype"]]))
        cur.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
            (table,),
        )
        triggers = {r["tgname"] for r in cur.fetchall()}
        primary_set = set(primary)
        described[table] = {
            "columns": {
                name: (nullable and name not in primary_set, kind)
                for name, (nullable, kind) in columns.items()
            },
            "primary": primary,
            "unique": unique,
            "checks": checks,
            "foreign": foreign,
            "indexes": indexes,
            "triggers": triggers,
        }
    return described


def _predicate(where: str | None) -> str | None:
    """A partial index's predicate, spelt the same whichever catalog printed it."""
    if where is None:
        return None
    text = re.sub(r"::[a-z ]+", "", where.lower())
    text = re.sub(r"[()]", "", text)
    text = re.sub(r"\s*=\s*", "=", text)
    return re.sub(r"\s+", " ", text).strip()


def _without_types(description: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        table: {
            **shape,
            "columns": {name: nullable for name, (nullable, _) in shape["columns"].items()},
        }
        for table, shape in description.items()
    }


# -- tests ----------------------------------------------------------------------------


def test_migrating_from_empty_gives_the_expected_job_tables(mf: MailFathom) -> None:
    schema = describe(mf)
    dialect_type = 1 if mf.store.dialect == "sqlite" else 2
    jobs = schema["mf_jobs"]
    assert jobs["columns"] == {
        name: (spec[0], spec[dialect_type]) for name, spec in JOBS_COLUMNS.items()
    }
    assert jobs["primary"] == ("id",)
    assert jobs["unique"] == {("idempotency_key",)}
    assert jobs["checks"] == JOBS_CHECKS
    assert jobs["indexes"] == JOBS_INDEXES
    assert jobs["foreign"] == set()
    guards = {"mf_jobs_state_moves", "mf_jobs_refuse_stranded_email"}  # migration 0004
    guards.add("mf_jobs_compaction_kept")  # retention
    expected_triggers = guards | ({"mf_jobs_notify"} if mf.store.dialect == "postgresql" else set())
    assert jobs["triggers"] == expected_triggers

    attempts = schema["mf_job_attempts"]
    assert attempts["unique"] == {("job_id", "attempt")}
    assert attempts["foreign"] == {("job_id", "mf_jobs", "id", "CASCADE")}
    assert [name for name, (nullable, _) in attempts["columns"].items() if not nullable] == [
        "id",
        "job_id",
        "attempt",
        "outcome",
        "failure_class",
        "message",
        "finished_at",
    ]
    events = schema["mf_job_events"]
    assert events["indexes"] == {
        "mf_job_events_job": (("job_id", "id"), None),
        "mf_job_events_at": (("at",), None),
    }
    assert events["foreign"] == {("job_id", "mf_jobs", "id", "CASCADE")}


def test_migrating_from_empty_gives_the_expected_outbox_tables(mf: MailFathom) -> None:
    schema = describe(mf)
    outbox = schema["mf_outbox"]
    expected = OUTBOX_CHECKS + (
        SQLITE_BOOLEAN_CHECKS if mf.store.dialect == "sqlite" else Counter()
    )
    assert outbox["checks"] == expected
    assert outbox["unique"] == {("idempotency_key",)}
    assert outbox["triggers"] == {
        "mf_outbox_stage_moves",
        "mf_outbox_transmissions_kept",
        "mf_outbox_compaction_kept",  # retention: once compacted, always
    }
    assert schema["mf_outbox_recipients"]["checks"] == OUTBOX_RECIPIENTS_CHECKS
    assert schema["mf_outbox_recipients"]["unique"] == {("email_id", "address")}
    assert schema["mf_outbox_events"]["checks"] == OUTBOX_EVENTS_CHECKS


def test_every_migration_is_recorded(mf: MailFathom) -> None:
    with raw_reading(mf) as cur:
        cur.execute("SELECT version, name, applied_at FROM mf_migrations ORDER BY version")
        rows = [(r["version"], r["name"], r["applied_at"]) for r in cur.fetchall()]
    expected = [(version, name) for version, name, _ in load_migrations(mf.store.dialect)]
    assert [(version, name) for version, name, _ in rows] == expected
    assert all(applied_at is not None for _, _, applied_at in rows)
    assert mf.migrate() == []


def test_both_dialects_build_the_same_schema(postgres_schema_url: str, tmp_path: Path) -> None:
    with (
        MailFathom(f"sqlite:///{tmp_path / 'mf.db'}") as lite,
        MailFathom(postgres_schema_url) as pg,
    ):
        assert lite.migrate() == pg.migrate()
        sqlite_schema, postgres_schema = describe(lite), describe(pg)
    assert sorted(sqlite_schema) == sorted(postgres_schema)
    for table, shape in postgres_schema.items():
        # SQLite has no boolean type: a CHECK (column IN (0, 1)) stands in for it
        for column, (_, kind) in shape["columns"].items():
            if kind == "boolean":
                sqlite_checks = sqlite_schema[table]["checks"]
                assert sqlite_checks[(column,)] == 1, f"{table}.{column} is not kept to 0/1"
                del sqlite_checks[(column,)]
    # Only PostgreSQL announces new jobs (SQLite's workers watch the file instead)
    postgres_schema["mf_jobs"]["triggers"].remove("mf_jobs_notify")
    assert _without_types(sqlite_schema) == _without_types(postgres_schema)


def test_postgres_announces_new_jobs_with_a_trigger(postgres_schema_url: str) -> None:
    with MailFathom(postgres_schema_url) as pg:
        pg.migrate()
        with raw_reading(pg) as cur:
            cur.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'mf_jobs'::regclass "
                "AND NOT tgisinternal ORDER BY tgname"
            )
            assert [r["tgname"] for r in cur.fetchall()] == [
                "mf_jobs_compaction_kept",
                "mf_jobs_notify",
                "mf_jobs_refuse_stranded_email",
                "mf_jobs_state_moves",
            ]

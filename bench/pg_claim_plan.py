"""Do claims, the lease reaper and enqueue stay flat as finished jobs pile up? (PostgreSQL)

Builds two scratch schemas with the same live work — ``--pending`` due jobs and
``--claimed`` jobs under an unexpired lease — one with nothing else and one with
``--finished`` Succeeded jobs besides, then for each hot query prints
``EXPLAIN (ANALYZE, BUFFERS)`` and the median and 99th-percentile latency of
``--runs`` executions (each in a transaction that is rolled back, so every run
sees the same table), as prepared statements the way a worker's pooled
connections run them — and once more forcing the generic plan that PostgreSQL
may switch a prepared statement to. Then it drains ``--churn`` jobs through
claim/complete with autovacuum off and shows the claim plan again, to expose
what dead index entries cost before vacuum removes them.

    python -m bench.pg_claim_plan                    # 1,000,000 finished rows
    python -m bench.pg_claim_plan --finished 20000   # quick

Uses ``MAILFATHOM_TEST_POSTGRES_URL`` (default: the local server); the scratch
schemas are dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.pg_common import conditions, quantile_ms, schema_url, scratch_schema
from mailfathom.clock import DEFAULT_CLOCK_SKEW
from mailfathom.store.base import NewJobs
from mailfathom.store.jobs.repository import batch_params as insert_params
from mailfathom.store.queries import load_queries

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cost:
    """What one statement costs on the server: median milliseconds and buffers."""

    ms: float
    buffers: int


Q = load_queries("postgresql")
Conn = psycopg.Connection[dict[str, Any]]


def fill(conn: Conn, *, finished: int, pending: int, claimed: int) -> float:
    """Bulk-load the rows (the NOTIFY trigger off meanwhile); returns seconds taken."""
    started = time.perf_counter()
    conn.execute("ALTER TABLE mf_jobs DISABLE TRIGGER mf_jobs_notify")
    conn.execute("ALTER TABLE mf_jobs SET (autovacuum_enabled = false)")
    if finished:
        conn.execute(
            "INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, "
            "available_at, attempts, max_attempts, claimed_by, claimed_at, created_at, "
            "finished_at) "
            "SELECT 'bench.noop', 'default', jsonb_build_object('n', g), 0, 'Succeeded', "
            "  'done:' || g, t, 1, 5, 'w', t, t, t "
            "FROM generate_series(1, %(n)s) AS g, "
            "  LATERAL (SELECT %(now)s - make_interval(secs => %(n)s - g) AS t) AS x",
            {"n": finished, "now": NOW - timedelta(hours=1)},
        )
    conn.execute(
        "INSERT INTO mf_jobs (kind, queue, payload, priority, state, available_at, "
        "max_attempts, created_at) "
        "SELECT 'bench.noop', CASE WHEN g %% 4 = 0 THEN 'mail' ELSE 'default' END, "
        "  jsonb_build_object('n', g), g %% 3, 'Pending', "
        "  %(now)s - make_interval(secs => g %% 600), 5, %(now)s - interval '10 minutes' "
        "FROM generate_series(1, %(n)s) AS g",
        {"n": pending, "now": NOW},
    )
    conn.execute(
        "INSERT INTO mf_jobs (kind, queue, payload, priority, state, available_at, attempts, "
        "max_attempts, lease_owner, lease_expires_at, claimed_by, claimed_at, created_at) "
        "SELECT 'bench.noop', 'default', '{}', 0, 'Claimed', %(now)s, 1, 5, 'w', "
        "  %(now)s + interval '30 seconds', 'w', %(now)s, %(now)s "
        "FROM generate_series(1, %(n)s) AS g",
        {"n": claimed, "now": NOW},
    )
    conn.execute("ALTER TABLE mf_jobs ENABLE TRIGGER mf_jobs_notify")
    conn.execute("VACUUM (ANALYZE) mf_jobs")
    return time.perf_counter() - started


def batch_params(size: int) -> dict[str, Any]:
    """``insert_jobs`` parameters for ``size`` new keyed jobs, as the store builds them."""
    tag = uuid.uuid4().hex[:8]
    batch = NewJobs(
        "bench.noop",
        "default",
        [json.dumps({"n": n}) for n in range(size)],
        0,
        NOW,
        5,
        idempotency_keys=[f"new:{tag}:{n}" for n in range(size)],
    )
    return insert_params(batch, NOW)


def held(conn: Conn, n: int) -> dict[str, list[int]]:
    """``n`` (id, attempt) pairs of Claimed jobs, as a worker holds them, in the two
    arrays the statements take (``ids``, ``attempts``)."""
    rows = conn.execute(
        "SELECT id, attempts FROM mf_jobs WHERE state = 'Claimed' LIMIT %s", (n,)
    ).fetchall()
    return pairs_of(rows)


def pairs_of(rows: list[Any]) -> dict[str, list[int]]:
    """Claimed rows as the ``ids`` and ``attempts`` arrays of their (id, attempt) pairs."""
    return {"ids": [row["id"] for row in rows], "attempts": [row["attempts"] for row in rows]}


def cases(conn: Conn) -> dict[str, tuple[str, Callable[[], dict[str, Any]]]]:
    """name -> (query, parameters) for every measured statement."""
    claim = {
        "owner": "bench",
        "limit": 10,
        "now": NOW,
        "lease_until": NOW + timedelta(30),
        "kinds": None,  # every kind, as a claim without a worker's kinds
    }
    pairs = held(conn, 10)
    return {
        "claim 10": (Q["claim_jobs"], lambda: claim),
        "claim 10 in ['mail']": (
            Q["claim_jobs_in_queues"],
            lambda: {**claim, "queues": '["mail"]'},
        ),
        "reap expired leases (none due)": (
            Q["reap_expired_leases"],
            lambda: {
                "now": NOW,
                "lease_cutoff": NOW - DEFAULT_CLOCK_SKEW,
                "owner": "bench",  # the reaper's own live leases, left alone: none here
                "ids": [],
                "attempts": [],
            },
        ),
        "enqueue 1 (insert_jobs)": (Q["insert_jobs"], lambda: batch_params(1)),
        "enqueue 100 (insert_jobs)": (Q["insert_jobs"], lambda: batch_params(100)),
        "extend 10 leases": (
            Q["extend_leases"],
            lambda: {"owner": "w", **pairs, "lease_until": NOW + timedelta(60)},
        ),
        "complete 10": (
            Q["complete_jobs"],
            lambda: {"owner": "w", "now": NOW, **pairs, "results": ""},  # none returned
        ),
    }


def explain(conn: Conn, query: str, params: dict[str, Any]) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of one run, rolled back."""
    with conn.transaction(force_rollback=True):
        rows = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {query}", params, prepare=False
        ).fetchall()
    return "\n".join(row["QUERY PLAN"] for row in rows)


def server_side(conn: Conn, query: str, params: Callable[[], dict[str, Any]], runs: int) -> Cost:
    """Median server execution time (ms) and shared buffers touched, from EXPLAIN ANALYZE."""
    times, buffers = [], []
    for _ in range(runs):
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}", params(), prepare=False
            ).fetchone()
        assert row is not None
        (report,) = row["QUERY PLAN"]
        plan = report["Plan"]
        times.append(report["Execution Time"])
        buffers.append(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"])
    return Cost(statistics.median(times), int(statistics.median(buffers)))


def latency(conn: Conn, query: str, params: Callable[[], dict[str, Any]], runs: int) -> list[float]:
    """Seconds per execution (prepared, each in a rolled-back transaction)."""
    took = []
    for _ in range(runs):
        values = params()
        with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            conn.execute(query, values, prepare=True).fetchall()
            took.append(time.perf_counter() - started)
    return took


_SQL_TYPES = {str: "text", int: "integer", datetime: "timestamptz", type(None): "text"}


def _sql_type(name: str, value: Any) -> str:
    """The SQL type of a parameter: a list is the ``ids`` (bigint) or ``attempts`` array."""
    if isinstance(value, list):
        return "bigint[]" if name == "ids" else "integer[]"
    return _SQL_TYPES[type(value)]


def generic_plan(conn: Conn, query: str, params: dict[str, Any]) -> str:
    """The plan a prepared statement gets once PostgreSQL settles on a generic plan."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = re.sub(r"%\((\w+)\)s", number, query)
    kinds = [_sql_type(name, params[name]) for name in names]
    types = ", ".join(kinds)
    placeholders = ", ".join(f"%s::{kind}" for kind in kinds)
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE mf_generic ({types}) AS {numbered}", prepare=False)
        # parameters of a utility statement cannot be bound server-side: inline them
        rows = (
            psycopg.ClientCursor(conn)
            .execute(
                f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE mf_generic ({placeholders})",
                [params[name] for name in names],
            )
            .fetchall()
        )
    conn.execute("DEALLOCATE mf_generic")
    return "\n".join(row["QUERY PLAN"] for row in rows)


def churn(conn: Conn, jobs: int) -> float:
    """Enqueue ``jobs`` and drain them 10 at a time through claim + complete; jobs/s."""
    conn.execute(Q["insert_jobs"], batch_params(jobs))
    started = time.perf_counter()
    done = 0
    claim = {
        "owner": "churn",
        "limit": 10,
        "now": NOW,
        "lease_until": NOW + timedelta(30),
        "kinds": None,
    }
    while done < jobs:
        with conn.transaction():
            rows = conn.execute(Q["claim_jobs"], claim).fetchall()
        if not rows:
            break
        with conn.transaction():
            conn.execute(
                Q["complete_jobs"], {"owner": "churn", "now": NOW, **pairs_of(rows), "results": ""}
            )
        done += len(rows)
    return done / (time.perf_counter() - started)


def ms(values: list[float], q: float) -> str:
    """The ``q`` quantile of ``values`` in milliseconds, as text."""
    return f"{quantile_ms(values, q):.3f}"


def main() -> None:
    """Build both schemas, measure, print a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=5_000)
    parser.add_argument("--claimed", type=int, default=200)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--churn", type=int, default=4_000)
    parser.add_argument("--plans", action="store_true", help="print every EXPLAIN")
    args = parser.parse_args()

    print(f"{conditions()}\n")
    client: dict[str, dict[str, list[float]]] = {}
    server: dict[str, dict[str, Cost]] = {}
    plans: dict[str, dict[str, str]] = {}
    for label, finished in (("small", 0), ("large", args.finished)):
        with (
            scratch_schema(label) as schema,
            psycopg.connect(schema_url(schema), autocommit=True, row_factory=dict_row) as conn,
        ):
            conn.execute("SET TIME ZONE 'UTC'")
            took = fill(conn, finished=finished, pending=args.pending, claimed=args.claimed)
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('mf_jobs')) AS s")
            row = size.fetchone()
            print(f"- {label}: {finished:,} Succeeded + {args.pending:,} Pending + "
                  f"{args.claimed:,} Claimed rows (loaded in {took:.1f} s; mf_jobs with "
                  f"indexes: {row['s'] if row else '?'})")  # fmt: skip
            client[label], server[label], plans[label] = {}, {}, {}
            for name, (query, params) in cases(conn).items():
                plans[label][name] = explain(conn, query, params())
                server[label][name] = server_side(conn, query, params, max(3, args.runs // 5))
                client[label][name] = latency(conn, query, params, args.runs)
            if label == "large":
                for name in ("claim 10", "reap expired leases (none due)"):
                    query, params = cases(conn)[name]
                    plans[label][f"{name}, generic plan"] = generic_plan(conn, query, params())
                rate = churn(conn, args.churn)
                drained = f"claim 10 after draining {args.churn:,} jobs, no vacuum"
                claim = cases(conn)["claim 10"]
                plans[label][drained] = explain(conn, *claim[:1], claim[1]())
                server[label][drained] = server_side(conn, claim[0], claim[1], 5)
                print(f"- claim+complete drain of {args.churn:,} jobs on one connection, "
                      f"batches of 10: {rate:,.0f} jobs/s")  # fmt: skip

    print("\n| statement | server ms, small | server ms, large | buffers, small | buffers, large "
          "| client p50 ms, small | client p50 ms, large |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, large in server["large"].items():
        small = server["small"].get(name)
        print(
            f"| {name} | {f'{small.ms:.3f}' if small else ''} | {large.ms:.3f} "
            f"| {small.buffers if small else ''} | {large.buffers} "
            f"| {ms(client['small'][name], 0.5) if name in client['small'] else ''} "
            f"| {ms(client['large'][name], 0.5) if name in client['large'] else ''} |"
        )
    print(f"\n(server: median EXPLAIN ANALYZE execution time and shared buffers; client: median "
          f"of {args.runs} prepared executions; every run rolled back)\n")  # fmt: skip
    for label, by_name in plans.items():
        for name, plan in by_name.items():
            if args.plans or label == "large":
                print(f"### {name} ({label})\n\n```\n{plan}\n```\n")


if __name__ == "__main__":
    main()

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
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.pg_common import conditions, quantile_ms, schema_url, scratch_schema
from mailfathom.store.queries import load_queries

NOW = datetime(2030, 1, 1, tzinfo=UTC)
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
    """``insert_jobs`` parameters for ``size`` new keyed jobs."""
    tag = uuid.uuid4().hex[:8]
    return {
        "kinds": ["bench.noop"] * size,
        "queues": ["default"] * size,
        "payloads": [json.dumps({"n": n}) for n in range(size)],
        "priorities": [0] * size,
        "keys": [f"new:{tag}:{n}" for n in range(size)],
        "available_at": [NOW] * size,
        "max_attempts": [5] * size,
        "now": NOW,
    }


def held(conn: Conn, n: int) -> str:
    """A JSON list of ``n`` (id, attempt) pairs of Claimed jobs, as a worker holds them."""
    rows = conn.execute(
        "SELECT id, attempts FROM mf_jobs WHERE state = 'Claimed' LIMIT %s", (n,)
    ).fetchall()
    return json.dumps([[row["id"], row["attempts"]] for row in rows])


def cases(conn: Conn) -> dict[str, tuple[str, Callable[[], dict[str, Any]]]]:
    """name -> (query, parameters) for every measured statement."""
    claim = {"owner": "bench", "limit": 10, "now": NOW, "lease_until": NOW + timedelta(30)}
    pairs = held(conn, 10)
    return {
        "claim 10": (Q["claim_jobs"], lambda: claim),
        "claim 10 in ['mail']": (
            Q["claim_jobs_in_queues"],
            lambda: {**claim, "queues": '["mail"]'},
        ),
        "reap expired leases (none due)": (Q["reap_expired_leases"], lambda: {"now": NOW}),
        "enqueue 1 (insert_jobs)": (Q["insert_jobs"], lambda: batch_params(1)),
        "enqueue 100 (insert_jobs)": (Q["insert_jobs"], lambda: batch_params(100)),
        "extend 10 leases": (
            Q["extend_leases"],
            lambda: {"owner": "w", "held": pairs, "lease_until": NOW + timedelta(60)},
        ),
        "complete 10": (Q["complete_jobs"], lambda: {"owner": "w", "now": NOW, "held": pairs}),
    }


def explain(conn: Conn, query: str, params: dict[str, Any]) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of one run, rolled back."""
    with conn.transaction(force_rollback=True):
        rows = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {query}", params, prepare=False
        ).fetchall()
    return "\n".join(row["QUERY PLAN"] for row in rows)


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


_SQL_TYPES = {str: "text", int: "integer", datetime: "timestamptz"}


def generic_plan(conn: Conn, query: str, params: dict[str, Any]) -> str:
    """The plan a prepared statement gets once PostgreSQL settles on a generic plan."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = re.sub(r"%\((\w+)\)s", number, query)
    kinds = [_SQL_TYPES[type(params[name])] for name in names]
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
    claim = {"owner": "churn", "limit": 10, "now": NOW, "lease_until": NOW + timedelta(30)}
    while done < jobs:
        with conn.transaction():
            rows = conn.execute(Q["claim_jobs"], claim).fetchall()
        if not rows:
            break
        pairs = json.dumps([[row["id"], row["attempts"]] for row in rows])
        with conn.transaction():
            conn.execute(Q["complete_jobs"], {"owner": "churn", "now": NOW, "held": pairs})
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
    results: dict[str, dict[str, list[float]]] = {}
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
            print(f"## {label}: {finished:,} Succeeded + {args.pending:,} Pending + "
                  f"{args.claimed:,} Claimed rows (loaded in {took:.1f} s; mf_jobs with "
                  f"indexes: {row['s'] if row else '?'})\n")  # fmt: skip
            results[label], plans[label] = {}, {}
            for name, (query, params) in cases(conn).items():
                plans[label][name] = explain(conn, query, params())
                results[label][name] = latency(conn, query, params, args.runs)
            if label == "large":
                for name in ("claim 10", "reap expired leases (none due)"):
                    query, params = cases(conn)[name]
                    plans[label][f"{name}, generic plan"] = generic_plan(conn, query, params())
                rate = churn(conn, args.churn)
                plans[label][f"claim 10 after draining {args.churn:,} jobs, no vacuum"] = explain(
                    conn, Q["claim_jobs"], cases(conn)["claim 10"][1]()
                )
                print(f"claim+complete drain of {args.churn:,} jobs, one connection, "
                      f"batches of 10: {rate:,.0f} jobs/s\n")  # fmt: skip

    print("| statement | p50 ms, no finished rows | p50 ms, large | p99 ms, large |")
    print("|---|---|---|---|")
    for name in results["small"]:
        small, large = results["small"][name], results["large"][name]
        print(f"| {name} | {ms(small, 0.5)} | {ms(large, 0.5)} | {ms(large, 0.99)} |")
    print(f"\n(median of {args.runs} prepared executions each, rolled back)\n")
    for label, by_name in plans.items():
        for name, plan in by_name.items():
            if args.plans or label == "large":
                print(f"### {name} ({label})\n\n```\n{plan}\n```\n")


if __name__ == "__main__":
    main()

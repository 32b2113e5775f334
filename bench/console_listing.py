"""How fast the console's job listing stays on a big table, and the plans behind it.

Fills a fresh database with ``--rows`` jobs (95 % Succeeded, 3 % DeadLettered,
1 % Pending — half of them held — 1 % Dropped; 20 kinds, 5 queues) straight
in SQL, then times every listing the console issues (first page and a deep
keyset page, each filter), the counts and the throughput read, and prints the
query plan of each.

    python -m bench.console_listing --rows 1000000 --database sqlite:////tmp/big.db
    python -m bench.console_listing --rows 1000000 --database postgresql://postgres@127.0.0.1/postgres
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from mailfathom import FakeClock, MailFathom
from mailfathom.console import Console, JobQuery

NOW = datetime(2030, 1, 1, tzinfo=UTC)

_FILL = {
    "sqlite": """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows),
s(i, state, t) AS (
    SELECT i,
        CASE WHEN i % 100 < 95 THEN 'Succeeded' WHEN i % 100 < 98 THEN 'DeadLettered'
             WHEN i % 100 = 98 THEN 'Pending' ELSE 'Dropped' END,
        strftime('%Y-%m-%dT%H:%M:%S', :start, '+' || (i * :step) || ' seconds') || '.000000+00:00'
    FROM n)
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     attempts, attempt_base, max_attempts, failure_class, failure_reason,
                     created_at, finished_at)
SELECT 'kind.' || (i % 20), 'q' || (i % 5), '{"order": ' || i || '}', 0, state, 'key:' || i,
       CASE WHEN state = 'Pending' AND i % 200 = 98 THEN NULL ELSE t END,
       CASE WHEN state = 'Pending' THEN 0 ELSE 1 END, 0, 5,
       CASE WHEN state IN ('DeadLettered', 'Dropped') THEN 'Permanent' END,
       CASE WHEN state IN ('DeadLettered', 'Dropped') THEN 'refused: 550 no mailbox ' || i END,
       t, CASE WHEN state = 'Pending' THEN NULL ELSE t END
FROM s
""",
    "postgresql": """
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     attempts, attempt_base, max_attempts, failure_class, failure_reason,
                     created_at, finished_at)
SELECT 'kind.' || (i %% 20), 'q' || (i %% 5), jsonb_build_object('order', i), 0, state,
       'key:' || i,
       CASE WHEN state = 'Pending' AND i %% 200 = 98 THEN NULL ELSE t END,
       CASE WHEN state = 'Pending' THEN 0 ELSE 1 END, 0, 5,
       CASE WHEN state IN ('DeadLettered', 'Dropped') THEN 'Permanent' END,
       CASE WHEN state IN ('DeadLettered', 'Dropped') THEN 'refused: 550 no mailbox ' || i END,
       t, CASE WHEN state = 'Pending' THEN NULL ELSE t END
FROM (
    SELECT i,
        CASE WHEN i %% 100 < 95 THEN 'Succeeded' WHEN i %% 100 < 98 THEN 'DeadLettered'
             WHEN i %% 100 = 98 THEN 'Pending' ELSE 'Dropped' END AS state,
        %(start)s::timestamptz + make_interval(secs => i * %(step)s) AS t
    FROM generate_series(1, %(rows)s) AS i
) AS s
""",
}

QUERIES: list[tuple[str, dict[str, str]]] = [
    ("all", {}),
    ("state=DeadLettered", {"state": "DeadLettered"}),
    ("state=Succeeded", {"state": "Succeeded"}),
    ("state=Held", {"state": "Held"}),
    ("kind=kind.7", {"kind": "kind.7"}),
    ("queue=q3", {"queue": "q3"}),
    ("state=DeadLettered kind=kind.16", {"state": "DeadLettered", "kind": "kind.16"}),
    ("text=mailbox 4242", {"text": "mailbox 4242"}),
    ("state=DeadLettered text=550", {"state": "DeadLettered", "text": "550"}),
    ("older_than=1d", {"older_than": "1d"}),
]


def fill(mf: MailFathom, rows: int) -> float:
    """Insert ``rows`` jobs ending at NOW; returns seconds taken."""
    span = timedelta(days=7)
    step = span.total_seconds() / rows
    start = NOW - span
    db = mf.store.db
    began = time.perf_counter()
    with db.transaction() as cur:
        params = {"rows": rows, "start": db.time_param(start), "step": step}
        if db.dialect == "sqlite":
            params["start"] = start.strftime("%Y-%m-%d %H:%M:%S")
        cur.execute(_FILL[db.dialect], params)
    with db.transaction() as cur:
        cur.execute("ANALYZE" if db.dialect == "sqlite" else "ANALYZE mf_jobs", {})
    return time.perf_counter() - began


def timed(call: Callable[[], Any], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


def plan(mf: MailFathom, query: JobQuery, before: int | None) -> str:
    """The database's plan for the listing ``query`` (its steps on one line)."""
    from mailfathom.store.base import JobFilter
    from mailfathom.store.sql_store import SqlStore

    store = mf.store
    assert isinstance(store, SqlStore)
    arguments = query.list_arguments(NOW)
    job_filter = JobFilter(**arguments)  # type: ignore[arg-type]
    sql, params = store.jobs.list_jobs_query(job_filter, limit=51, before_id=before)
    explain = "EXPLAIN QUERY PLAN " if store.dialect == "sqlite" else "EXPLAIN "
    with store.db.reading() as cur:
        cur.execute(explain + sql, params)
        rows = [dict(row) for row in cur.fetchall()]
    if store.dialect == "sqlite":
        return " | ".join(str(row["detail"]) for row in rows)
    return " | ".join(str(next(iter(row.values()))).strip() for row in rows)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; print a table; return the measurements."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plans", action="store_true", help="print each query plan")
    args = parser.parse_args(argv)
    clock = FakeClock(NOW)
    results = []
    with MailFathom(args.database, clock=clock) as mf:
        mf.migrate()
        seconds = fill(mf, args.rows)
        print(f"{mf.store.dialect}: filled {args.rows:,} jobs in {seconds:.1f} s")
        console = Console(mf)
        deep = args.rows // 2
        for label, values in QUERIES:
            query = JobQuery.parse(values)
            first = timed(partial(console.jobs, query, limit=50), args.repeat)
            later = timed(partial(console.jobs, query, before_id=deep, limit=50), args.repeat)
            results.append({"query": label, "first_page_ms": first, "deep_page_ms": later})
            print(f"  {label:<34} first page {first:8.2f} ms   page at id {deep:,} {later:8.2f} ms")
            if args.plans:
                print(f"      plan: {plan(mf, query, deep)}")
        for label, call in (
            ("counts per state", mf.jobs.counts),
            ("held count", mf.jobs.held_count),
            ("throughput, last hour", lambda: mf.jobs.throughput(60)),
            ("overview (all of it)", console.overview),
        ):
            ms = timed(call, args.repeat)
            results.append({"query": label, "ms": ms})
            print(f"  {label:<34} {ms:8.2f} ms")
    return results


if __name__ == "__main__":
    main()

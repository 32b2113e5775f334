"""The PostgreSQL ceiling: a minimal durable queue in plain SQL over psycopg 3.

A batch is claimed with ``FOR UPDATE SKIP LOCKED`` in one committed
``UPDATE … RETURNING`` and completed in one committed ``UPDATE``: two round trips
per batch, statements prepared by psycopg after their fifth use. Nothing else
happens per job: this is what the server allows on this machine.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psycopg

from bench.drivers.protocol import Spec, await_go, memory_kb, run_driver

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload     JSONB  NOT NULL,
    state       TEXT   NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until TIMESTAMPTZ,
    finished_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS jobs_pending ON jobs (id) WHERE state = 'pending';
"""

CLAIM = """
UPDATE jobs SET state = 'claimed', lease_owner = %s, lease_until = now() + interval '30 s',
       attempts = attempts + 1
WHERE id IN (SELECT id FROM jobs WHERE state = 'pending' ORDER BY id LIMIT %s
             FOR UPDATE SKIP LOCKED)
RETURNING id, payload
"""

COMPLETE = """
UPDATE jobs SET state = 'done', finished_at = now(), lease_owner = NULL, lease_until = NULL
WHERE id = ANY(%s) AND lease_owner = %s
"""


def _connect(spec: Spec) -> psycopg.Connection[Any]:
    conn = psycopg.connect(spec["url"], autocommit=True)
    if spec.get("install"):
        conn.execute(SCHEMA)
    return conn


def enqueue_single(spec: Spec) -> dict[str, Any]:
    """One INSERT per committed transaction (autocommit: one round trip each)."""
    conn = _connect(spec)
    start = await_go()
    for i in range(spec["n"]):
        conn.execute(
            "INSERT INTO jobs (payload, state) VALUES (%s::jsonb, 'pending')",
            (json.dumps({"i": i}),),
        )
    end = time.monotonic()
    return {"start": start, "end": end, "count": spec["n"]}


def enqueue_batch(spec: Spec) -> dict[str, Any]:
    """One ``INSERT … SELECT unnest(array)`` per batch."""
    conn = _connect(spec)
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        payloads = [json.dumps({"i": i}) for i in range(first, min(n, first + batch))]
        conn.execute(
            "INSERT INTO jobs (payload, state) "
            "SELECT p::jsonb, 'pending' FROM unnest(%s::text[]) AS p",
            (payloads,),
        )
    end = time.monotonic()
    return {"start": start, "end": end, "count": n}


def process(spec: Spec) -> dict[str, Any]:
    """Claim ``batch`` jobs, run no-ops, complete them; until nothing is left."""
    conn = _connect(spec)
    owner = f"ceiling-{os.getpid()}"
    done = 0
    start = await_go()
    while True:
        claimed = conn.execute(CLAIM, (owner, spec["batch"])).fetchall()
        if not claimed:
            break
        ids = [job_id for job_id, payload in claimed if payload is not None]
        conn.execute(COMPLETE, (ids, owner))
        done += len(ids)
    end = time.monotonic()
    return {"start": start, "end": end, "count": done, "memory_at_end": memory_kb()}


if __name__ == "__main__":
    run_driver(
        {"enqueue_single": enqueue_single, "enqueue_batch": enqueue_batch, "process": process}
    )

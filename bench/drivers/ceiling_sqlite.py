"""The SQLite ceiling: a minimal durable queue in plain SQL (standard library only).

WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``: the same durability mailfathom
promises. A batch is claimed in one committed ``UPDATE … RETURNING`` (so a crash
while it runs loses nothing), then completed in one committed ``UPDATE``. Nothing
else happens per job: this is what the database allows on this machine.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

from bench.drivers.protocol import Spec, await_go, memory_kb, run_driver

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          INTEGER PRIMARY KEY,
    payload     TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_pending ON jobs (id) WHERE state = 'pending';
"""


def _connect(spec: Spec) -> sqlite3.Connection:
    conn = sqlite3.connect(spec["path"], isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    if spec.get("install"):
        conn.executescript(SCHEMA)
    return conn


def enqueue_single(spec: Spec) -> dict[str, Any]:
    """One INSERT per committed transaction."""
    conn = _connect(spec)
    start = await_go()
    for i in range(spec["n"]):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO jobs (payload, state) VALUES (?, 'pending')", (json.dumps({"i": i}),)
        )
        conn.execute("COMMIT")
    end = time.monotonic()
    return {"start": start, "end": end, "count": spec["n"]}


def enqueue_batch(spec: Spec) -> dict[str, Any]:
    """``executemany`` of one batch per committed transaction."""
    conn = _connect(spec)
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        rows = [(json.dumps({"i": i}),) for i in range(first, min(n, first + batch))]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO jobs (payload, state) VALUES (?, 'pending')", rows)
        conn.execute("COMMIT")
    end = time.monotonic()
    return {"start": start, "end": end, "count": n}


def process(spec: Spec) -> dict[str, Any]:
    """Claim ``batch`` jobs (commit), run no-ops, complete them (commit), until none is left."""
    conn = _connect(spec)
    owner = f"ceiling-{os.getpid()}"
    done = 0
    start = await_go()
    while True:
        conn.execute("BEGIN IMMEDIATE")
        claimed = conn.execute(
            "UPDATE jobs SET state = 'claimed', lease_owner = ?, lease_until = ?, "
            "attempts = attempts + 1 WHERE id IN (SELECT id FROM jobs WHERE state = 'pending' "
            "ORDER BY id LIMIT ?) RETURNING id, payload",
            (owner, time.time() + 30.0, spec["batch"]),
        ).fetchall()
        conn.execute("COMMIT")
        if not claimed:
            break
        ids = [job_id for job_id, payload in claimed if json.loads(payload) is not None]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE jobs SET state = 'done', finished_at = ?, lease_owner = NULL, "
            "lease_until = NULL WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))",
            (time.time(), owner, json.dumps(ids)),
        )
        conn.execute("COMMIT")
        done += len(ids)
    end = time.monotonic()
    return {"start": start, "end": end, "count": done, "memory_at_end": memory_kb()}


if __name__ == "__main__":
    run_driver(
        {"enqueue_single": enqueue_single, "enqueue_batch": enqueue_batch, "process": process}
    )

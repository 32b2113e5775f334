"""mailfathom's async API under the benchmark: ``AsyncMailFathom`` enqueueing inside the
application's own async transaction (aiosqlite, psycopg's ``AsyncConnection``), one
commit per job or per batch, as an async web request would."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiosqlite
import psycopg

from bench.drivers.protocol import Spec, await_go, run_driver
from mailfathom import AsyncMailFathom, MailFathom

KIND = "bench.noop"


async def _connection(mf: MailFathom, url: str) -> Any:
    """The application's own async connection on mailfathom's database."""
    if url.startswith("sqlite:///"):
        return await aiosqlite.connect(url.removeprefix("sqlite:///"))
    return await psycopg.AsyncConnection.connect(url)


async def _enqueue(spec: Spec, batch: int) -> dict[str, Any]:
    mf = MailFathom(spec["url"])
    if spec.get("install"):
        mf.migrate()
    amf = AsyncMailFathom(mf)
    conn = await _connection(mf, spec["url"])
    await amf.jobs.counts()  # the pool and the worker thread, before the clock starts
    n = spec["n"]
    start = await_go()
    for first in range(0, n, batch):
        payloads = [{"i": i} for i in range(first, min(n, first + batch))]
        if batch == 1:
            await amf.enqueue(KIND, payloads[0], connection=conn)
        else:
            await amf.enqueue_many(KIND, payloads, connection=conn)
        await conn.commit()
    end = time.monotonic()
    await conn.close()
    mf.close()
    return {"start": start, "end": end, "count": n}


def enqueue_single(spec: Spec) -> dict[str, Any]:
    """One job per committed transaction of the application's connection."""
    return asyncio.run(_enqueue(spec, 1))


def enqueue_batch(spec: Spec) -> dict[str, Any]:
    """``enqueue_many`` in batches of ``spec['batch']``, one commit each."""
    return asyncio.run(_enqueue(spec, spec["batch"]))


if __name__ == "__main__":
    run_driver({"enqueue_single": enqueue_single, "enqueue_batch": enqueue_batch})

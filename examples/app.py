"""An example app: two job kinds and a schedule, worked by ``make run``.

``make run`` migrates the default database (``sqlite:///mailfathom.db``, or
``MAILFATHOM_DATABASE_URL``) and starts ``mailfathom worker --app examples.app:mf``.
The schedule enqueues ``examples.tick`` every ten seconds; enqueue a greeting from
another terminal with::

    .venv/bin/python -c "from examples.app import mf; mf.enqueue('examples.greet', {'name': 'Ada'})"
"""

from __future__ import annotations

import asyncio

from mailfathom import JobContext, MailFathom, PermanentFailure

mf = MailFathom()  # the URL comes from MAILFATHOM_DATABASE_URL, mailfathom.toml or the default


@mf.job("examples.greet", max_attempts=5, timeout=30)
def greet(ctx: JobContext, name: str) -> None:
    """A plain handler: runs on the worker's thread pool."""
    if not name.strip():
        raise PermanentFailure("nobody to greet: the name is empty")
    ctx.logger.info("hello, %s (job %d, attempt %d)", name, ctx.job_id, ctx.attempt)


@mf.job("examples.tick", timeout=5)
async def tick(ctx: JobContext) -> None:
    """An ``async def`` handler: runs on the worker's event loop, cancelled at its timeout."""
    await asyncio.sleep(0.1)
    ctx.logger.info("tick (job %d)", ctx.job_id)


mf.schedule("examples.every-ten-seconds", cron="* * * * * */10", kind="examples.tick")

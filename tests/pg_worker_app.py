"""The app that the PostgreSQL multi-worker tests run in ``mailfathom worker`` processes.

Its one kind, ``pg.noop``, does nothing but note that it ran: each process
appends ``<job id> <attempt>`` lines to ``<pid>.log`` in the folder named by
``MF_PG_RUN_LOG``, so a test can count executions independently of the
database's own bookkeeping.
"""

from __future__ import annotations

import os

from mailfathom import JobContext, MailFathom

RUN_LOG = "MF_PG_RUN_LOG"


def noop(ctx: JobContext) -> None:
    """Record the execution and return."""
    folder = os.environ.get(RUN_LOG)
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.log"), "a", encoding="utf-8") as log:
            log.write(f"{ctx.job_id} {ctx.attempt}\n")


mf = MailFathom()
mf.job("pg.noop", max_attempts=50)(noop)

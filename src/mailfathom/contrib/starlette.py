"""Starlette and FastAPI: run a worker inside the application process.

``FastAPI(lifespan=worker_lifespan(mf))`` (or ``Starlette(lifespan=...)``) starts a
:class:`~mailfathom.jobs.worker.worker.Worker` on a thread of its own when the application
starts, and stops it gracefully when the application shuts down: it stops claiming,
lets running jobs finish (up to ``shutdown_timeout``), records their outcomes and
deregisters, before the server exits. For a team that wants one process; a
separate ``mailfathom worker`` scales and restarts independently, and is what
larger deployments run.

The console to mount beside it is :func:`mailfathom.web.create_app`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from mailfathom.observability.logs import log_fields

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["worker_lifespan"]

logger = logging.getLogger(__name__)

#: The lifespan state key under which the running worker is found
#: (``request.state.mailfathom_worker`` in a handler).
STATE_KEY = "mailfathom_worker"


def worker_lifespan(
    mf: MailFathom,
    *,
    concurrency: int | None = None,
    queues: Sequence[str] | None = None,
    lease: float | None = None,
    shutdown_timeout: float | None = None,
    poll_interval: float = 1.0,
) -> Callable[[Any], AbstractAsyncContextManager[dict[str, Any]]]:
    """A lifespan that runs ``mf``'s worker on a thread while the application runs.

    The arguments are those of :meth:`MailFathom.worker`. The worker is validated
    when the application starts (a bad argument fails the start, not a job). Its
    signal handlers stay the server's (a worker off the main thread installs none):
    the server's shutdown is what stops it.
    """

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[dict[str, Any]]:
        worker = mf.worker(
            concurrency,
            queues,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
            poll_interval=poll_interval,
        )

        def run() -> None:
            try:
                worker.run()
            except BaseException:  # logged here: a thread's error has no caller
                logger.exception(
                    "worker=%s stopped on an error",
                    worker.id,
                    extra=log_fields("worker_failed", worker=worker.id),
                )

        thread = threading.Thread(target=run, name=f"mailfathom-{worker.id}", daemon=True)
        thread.start()
        try:
            yield {STATE_KEY: worker}
        finally:
            worker.stop()
            await asyncio.to_thread(thread.join)
            logger.info(
                "worker=%s stopped with the application",
                worker.id,
                extra=log_fields("worker_stopped_with_app", worker=worker.id),
            )

    return lifespan

"""The worker: claims due jobs in batches, runs their handlers, records the outcomes."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta

from mailfathom.jobs.execute import execute
from mailfathom.jobs.queue import JobQueue

__all__ = ["Worker"]

logger = logging.getLogger("mailfathom.worker")


class Worker:
    """Runs jobs from ``queues`` (all when None), ``concurrency`` at a time."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        concurrency: int = 10,
        queues: Sequence[str] | None = None,
        lease: float = 30.0,
        shutdown_timeout: float = 30.0,
        poll_interval: float = 1.0,
    ) -> None:
        self._queue = queue
        self.concurrency = concurrency
        self.queues = list(queues) if queues is not None else None
        self.lease = timedelta(seconds=lease)
        self.shutdown_timeout = shutdown_timeout
        self.poll_interval = poll_interval
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stopping = False

    def run(self, *, burst: bool = False) -> int:
        """Work until stopped; with ``burst=True``, until nothing is due. Returns jobs run."""
        done = 0
        while not self._stopping:
            jobs = self._queue.claim(self.id, self.concurrency, self.lease, self.queues)
            if not jobs:
                if burst:
                    break
                time.sleep(self.poll_interval)
                continue
            clock = self._queue.clock
            results = [execute(self._queue.registry.get(job.kind), job, clock) for job in jobs]
            lost = self._queue.finish(self.id, results)
            for job_id in lost:
                logger.warning("job %s: lease lost before its outcome was recorded", job_id)
            done += len(results)
        return done

    def stop(self) -> None:
        """Stop claiming; the current batch finishes."""
        self._stopping = True

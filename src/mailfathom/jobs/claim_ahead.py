"""Claiming ahead of the free slots while jobs are short.

Internal. A claim costs a commit (and on PostgreSQL a wait for the server) however
many jobs it takes, so a worker whose jobs take a millisecond would spend most of
its time claiming ten at a time. While jobs are short, the worker therefore claims
more than its free slots: the extra jobs wait here, already leased (the heartbeat
renews them), and start the moment a slot frees. How many is sized from the
recent run time, so that the last of them is expected to start within
``HORIZON`` seconds: jobs of a second or longer are never claimed ahead, and no
worker sits on work that another worker could be running.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from mailfathom.jobs.model import Job

__all__ = ["HORIZON", "MOST", "ReadyJobs"]

#: Seconds within which the last job claimed ahead is expected to start.
HORIZON = 0.05
#: At most this many times ``concurrency`` are claimed ahead, whatever the run time.
MOST = 10
_WEIGHT = 0.1  # of the newest attempt in the run-time average


class ReadyJobs:
    """Jobs claimed ahead, oldest claim first, and how many more to claim.

    Not locked itself: the worker calls it under its own lock.
    """

    def __init__(self, concurrency: int) -> None:
        self._concurrency = concurrency
        self._jobs: deque[Job] = deque()
        self._run_time: float | None = None  # moving average, seconds

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[Job]:
        return iter(self._jobs)

    def extra(self) -> int:
        """How many jobs to claim beyond the slots (0 until a run time is known)."""
        run_time = self._run_time
        if run_time is None:
            return 0
        fits = HORIZON * self._concurrency / max(run_time, 1e-6)
        return min(int(fits), MOST * self._concurrency)

    def ran(self, seconds: float) -> None:
        """An attempt took ``seconds`` from its start to its end."""
        average = self._run_time
        self._run_time = seconds if average is None else average + _WEIGHT * (seconds - average)

    def add(self, jobs: Iterable[Job]) -> None:
        """Jobs just claimed, in claim order."""
        self._jobs.extend(jobs)

    def next(self) -> Job:
        """The oldest claim (there must be one)."""
        return self._jobs.popleft()

    def drop(self, lost: set[tuple[int, int]]) -> list[Job]:
        """Forget the jobs whose ``(id, attempt)`` lease is lost; returns them."""
        gone = [job for job in self._jobs if (job.id, job.attempts) in lost]
        for job in gone:
            self._jobs.remove(job)
        return gone

    def take_all(self) -> list[Job]:
        """Every job still waiting, which is forgotten here."""
        jobs = list(self._jobs)
        self._jobs.clear()
        return jobs

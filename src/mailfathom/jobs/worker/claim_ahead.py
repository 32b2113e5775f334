"""Claiming ahead of the free slots while jobs are short.

Internal. A claim costs a commit (and on PostgreSQL a wait for the server) however
many jobs it takes, so a worker whose jobs take a millisecond would spend most of
its time claiming ten at a time. While jobs are short, the worker therefore claims
more than its free slots: the extra jobs wait here, already leased (the heartbeat
renews them), and start the moment a slot frees. How many is sized from the
recent run time (a moving average of the attempts that ended), so that the last of
them is expected to start within ``HORIZON`` seconds: ``HORIZON * concurrency /
run time`` jobs, at most ``MOST * concurrency``. Nothing is claimed ahead before a
first attempt has ended, nor once the average run time exceeds ``HORIZON *
concurrency`` seconds (50 ms with one slot, a second with twenty), so no worker sits
on work that another worker could be running.

A guess can be wrong — one long job among short ones holds the slot the jobs
claimed ahead were waiting for. A job claimed ahead that has not started
``LATE_AFTER`` seconds after its claim is therefore handed back (the worker
releases it to Pending, its attempt uncounted) and nothing more is claimed ahead
until an attempt ends, so idle workers elsewhere take it instead of it waiting
here behind the long job.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from mailfathom.jobs.model import Job

__all__ = ["HORIZON", "LATE_AFTER", "MOST", "ReadyJobs"]

#: Seconds within which the last job claimed ahead is expected to start.
HORIZON = 0.05
#: Seconds after its claim at which a job claimed ahead and not started is handed back
#: (twice the horizon it was sized for, so that ordinary jitter does not trigger it).
LATE_AFTER = 2 * HORIZON
#: At most this many times ``concurrency`` are claimed ahead, whatever the run time.
MOST = 10
_WEIGHT = 0.1  # of the newest attempt in the run-time average


class ReadyJobs:
    """Jobs claimed ahead, oldest claim first, and how many more to claim.

    Not locked itself: the executor calls it under its own lock. Instants are
    ``time.monotonic()`` seconds, passed in by the caller.
    """

    def __init__(self, concurrency: int) -> None:
        self._concurrency = concurrency
        self._jobs: deque[tuple[Job, float]] = deque()  # (job, instant it was claimed)
        self._run_time: float | None = None  # moving average, seconds
        self._stalled = False  # a job went late: claim nothing ahead until an attempt ends

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[Job]:
        return (job for job, _ in self._jobs)

    def extra(self) -> int:
        """How many jobs to claim beyond the slots (0 until a run time is known, and
        while the last guess proved wrong)."""
        run_time = self._run_time
        if run_time is None or self._stalled:
            return 0
        fits = HORIZON * self._concurrency / max(run_time, 1e-6)
        return min(int(fits), MOST * self._concurrency)

    def ran(self, seconds: float) -> None:
        """An attempt took ``seconds`` from its start to its end."""
        average = self._run_time
        self._run_time = seconds if average is None else average + _WEIGHT * (seconds - average)
        self._stalled = False

    def add(self, jobs: Iterable[Job], now: float) -> None:
        """Jobs just claimed (at ``now``), in claim order."""
        self._jobs.extend((job, now) for job in jobs)

    def next(self) -> Job:
        """The oldest claim (there must be one)."""
        return self._jobs.popleft()[0]

    def late(self, now: float) -> list[Job]:
        """Forget and return the jobs claimed ``LATE_AFTER`` seconds or more before ``now``."""
        gone: list[Job] = []
        while self._jobs and self._jobs[0][1] + LATE_AFTER <= now:
            gone.append(self._jobs.popleft()[0])
        if gone:
            self._stalled = True
        return gone

    def late_at(self) -> float | None:
        """The instant the oldest job here goes late (None when none waits)."""
        return self._jobs[0][1] + LATE_AFTER if self._jobs else None

    def drop(self, lost: set[tuple[int, int]]) -> list[Job]:
        """Forget the jobs whose ``(id, attempt)`` lease is lost; returns them."""
        gone = [entry for entry in self._jobs if (entry[0].id, entry[0].attempts) in lost]
        for entry in gone:
            self._jobs.remove(entry)
        return [job for job, _ in gone]

    def take_all(self) -> list[Job]:
        """Every job still waiting, which is forgotten here."""
        jobs = [job for job, _ in self._jobs]
        self._jobs.clear()
        return jobs

"""Flow control across real worker processes on each store: an instrumented handler logs
every start and end, and the log shows the fleet-wide limits (overall and per key) never
exceeded, with one worker SIGKILLed mid-run and the others finishing everything."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from flow_app import MAX_PER_KEY, MAX_RUNNING, register
from mailfathom import JobState, MailFathom
from worker_processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow

LIMITED, FREE, KEYS = 2000, 500, 10  # thousands of jobs, ten keys


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals that overlap at one instant (an end before a start at a tie)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def read_log(log: Path, killed_pid: int, killed_at: float) -> dict[str, list[tuple[float, float]]]:
    """Intervals per group ("limited", "limited:<key>", "free"). An attempt the SIGKILL cut
    short ended when its process died."""
    starts: dict[tuple[str, str], tuple[str, str, float]] = {}
    intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        kind, key, what, at, pid, job = line.split()
        attempt = (pid, job)
        if what == "start":
            assert attempt not in starts, f"job {job} started twice in process {pid}"
            starts[attempt] = (kind, key, float(at))
        else:
            kind, key, began = starts.pop(attempt)
            intervals[kind].append((began, float(at)))
            intervals[f"{kind}:{key}"].append((began, float(at)))
    for (pid, _), (kind, key, began) in starts.items():
        assert int(pid) == killed_pid, "an attempt never ended in a live worker"
        intervals[kind].append((began, killed_at))
        intervals[f"{kind}:{key}"].append((began, killed_at))
    return intervals


def test_limits_hold_across_processes_with_a_worker_sigkilled(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    with MailFathom(database_url) as app:
        app.migrate()
        register(app)
        limited = app.enqueue_many(
            "flow.limited",
            [{"key": n % KEYS, "log": str(log), "seconds": 0.005} for n in range(LIMITED)],
        )
        assert [job.limit_key for job in limited[: KEYS + 1]] == [*map(str, range(KEYS)), "0"]
        app.enqueue_many("flow.free", [{"log": str(log), "seconds": 0.002}] * FREE)
        workers = [
            start_worker(
                database_url,
                tmp_path / f"w{n}.log",
                "--concurrency",
                "4",
                "--lease",
                "1",
                app="flow_app:mf",
            )
            for n in range(3)
        ]
        try:
            victim = workers[0]
            wait_for(
                lambda: log.exists() and log.read_text().count(f" {victim.pid} ") >= 10,
                120,
                "the first worker to run jobs",
                tmp_path / "w0.log",
                victim,
            )
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            killed_at = time.monotonic()
            wait_for(
                lambda: app.jobs.counts().get(JobState.SUCCEEDED, 0) == LIMITED + FREE,
                180,
                "every job to succeed",
                tmp_path / "w1.log",
                workers[1],
            )
        finally:
            for worker in workers[1:]:
                stop(worker)
            if victim.poll() is None:
                victim.kill()
        counts = {state: n for state, n in app.jobs.counts().items() if n}
        assert counts == {JobState.SUCCEEDED: LIMITED + FREE}  # nothing lost
    intervals = read_log(log, victim.pid, killed_at)
    assert len(intervals["limited"]) >= LIMITED and len(intervals["free"]) >= FREE
    assert most_at_once(intervals["limited"]) <= MAX_RUNNING
    assert most_at_once(intervals["free"]) > 1  # the free kind ran alongside, in parallel
    per_key = [most_at_once(intervals[f"limited:{key}"]) for key in range(KEYS)]
    assert max(per_key) <= MAX_PER_KEY
    assert most_at_once(intervals["limited"]) > 1  # limited jobs did run side by side

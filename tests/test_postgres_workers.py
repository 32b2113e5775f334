"""Many ``mailfathom worker`` processes on one PostgreSQL database, with and without crashes.

* 4 workers drain 20,000 jobs: each runs exactly once.
* 20 SIGKILLs among 4 workers while they drain 5,000 jobs (each victim replaced
  at once; fewer jobs than the first test to keep the suite within its time
  budget — the same test passes with 20,000, set ``JOBS_UNDER_FIRE``): every job
  ends terminal, none is lost, and a job ran more than once only when an earlier
  attempt is recorded as lost with its killed worker.
* The database goes down while 4 workers run, until one of them notices, and comes
  back: they carry on (a batch enqueued after the outage runs too), nothing is lost.

Executions are counted independently of the database: the handler appends to a
log file per process (see ``pg_worker_app.py``).
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from mailfathom import MailFathom
from pg_worker_app import RUN_LOG
from private_cluster import PrivateCluster, fresh_database, private_cluster
from worker_processes import Readiness, start_worker, stop, wait_for

pytestmark = pytest.mark.slow

JOBS = 20_000
JOBS_UNDER_FIRE = 5_000
Worker = subprocess.Popen[bytes]


def _start(url: str, tmp_path: Path, *options: str, readiness: Readiness | None = None) -> Worker:
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    return start_worker(
        url,
        tmp_path / "workers.log",
        "--log-level",
        "warning",
        *options,
        app="pg_worker_app:mf",
        # one machine, one clock
        env={
            RUN_LOG: str(runs),
            "MAILFATHOM_CLOCK_SKEW": "0",
            **(readiness.env() if readiness is not None else {}),
        },
    )


@pytest.fixture
def readiness() -> Iterator[Readiness]:
    """A notify socket the workers report READY=1 to."""
    made = Readiness()
    yield made
    made.close()


def _enqueue(url: str, jobs: int) -> None:
    with MailFathom(url) as app:
        app.migrate()
        for first in range(0, jobs, 1000):
            app.enqueue_many("pg.noop", [{} for _ in range(first, min(jobs, first + 1000))])


def _executions(tmp_path: Path) -> dict[int, list[tuple[int, int]]]:
    """job id -> every (pid, attempt) that ran it; a line torn by SIGKILL is skipped."""
    ran: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for log in (tmp_path / "runs").glob("*.log"):
        pid = int(log.stem)
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and all(part.isdigit() for part in parts):
                ran[int(parts[0])].append((pid, int(parts[1])))
    return ran


def _history(url: str) -> dict[int, tuple[str, int, int, int]]:
    """job id -> (state, attempts, LeaseExpired attempts, other recorded attempts)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT j.id, j.state, j.attempts, "
            "  count(a.id) FILTER (WHERE a.outcome = 'LeaseExpired'), "
            "  count(a.id) FILTER (WHERE a.outcome <> 'LeaseExpired') "
            "FROM mf_jobs j LEFT JOIN mf_job_attempts a ON a.job_id = j.id GROUP BY j.id"
        ).fetchall()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


class _Progress:
    """Counts finished jobs on one kept connection (a new one per poll would load the box)."""

    def __init__(self, url: str) -> None:
        self._conn = psycopg.connect(url, autocommit=True)

    def done(self) -> int:
        """How many jobs are terminal now (polling at most every 0.1 s)."""
        time.sleep(0.1)
        row = self._conn.execute(
            "SELECT count(*) FROM mf_jobs WHERE state NOT IN ('Pending', 'Claimed')"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the connection, even when the server restarted under it."""
        self._conn.close()


@pytest.fixture
def progress() -> Iterator[Callable[[str], _Progress]]:
    """Open progress counters, closed after the test."""
    made: list[_Progress] = []

    def open_on(url: str) -> _Progress:
        made.append(_Progress(url))
        return made[-1]

    yield open_on
    for counter in made:
        counter.close()


def _check_nothing_lost_or_silently_repeated(url: str, tmp_path: Path, jobs: int) -> Counter[int]:
    """Every job succeeded; each extra execution is a recorded lost attempt. Returns
    how many executions each job had."""
    history = _history(url)
    assert len(history) == jobs
    assert {state for state, _, _, _ in history.values()} == {"Succeeded"}
    for job_id, (_, attempts, lost, other) in history.items():
        assert other == 0, f"job {job_id} has a failed attempt"
        assert attempts == lost + 1, f"job {job_id}: {attempts} attempts, {lost} recorded lost"
    ran = _executions(tmp_path)
    runs = Counter({job_id: len(done) for job_id, done in ran.items()})
    for job_id, (_, attempts, _, _) in history.items():
        assert 1 <= runs[job_id] <= attempts, f"job {job_id} ran {runs[job_id]}x, {attempts} tries"
    return runs


@pytest.fixture
def url(postgres_schema_url: str) -> str:
    """A fresh, migrated schema on the shared server."""
    with MailFathom(postgres_schema_url) as app:
        app.migrate()
    return postgres_schema_url


def test_four_workers_run_twenty_thousand_jobs_exactly_once(url: str, tmp_path: Path) -> None:
    _enqueue(url, JOBS)
    workers = [_start(url, tmp_path, "--burst") for _ in range(4)]
    try:
        for worker in workers:
            assert worker.wait(240) == 0, (tmp_path / "workers.log").read_text()
    finally:
        for worker in workers:
            stop(worker)
    runs = _check_nothing_lost_or_silently_repeated(url, tmp_path, JOBS)
    assert set(runs.values()) == {1}, "a job ran twice although nothing crashed"
    assert {attempt for done in _executions(tmp_path).values() for _, attempt in done} == {1}
    share = Counter(pid for done in _executions(tmp_path).values() for pid, _ in done)
    assert set(share) == {worker.pid for worker in workers}, f"not every worker ran jobs: {share}"


# Its own deadlines (90 s without a finished job while killing, 180 s for the rest, 120 s per
# worker's stop) are what it waits on; the suite's 120 s limit would cut a loaded run short.
@pytest.mark.timeout(600)
def test_twenty_sigkills_lose_nothing(
    url: str, tmp_path: Path, progress: Callable[[str], _Progress], readiness: Readiness
) -> None:
    total = JOBS_UNDER_FIRE  # topped up while the kills go on: fast workers never run dry
    _enqueue(url, total)
    done = progress(url).done
    rng = random.Random()
    live = [_start(url, tmp_path, "--lease", "3", readiness=readiness) for _ in range(4)]
    killed: list[int] = []
    try:
        # A liveness check, not a speed limit: each replacement starts from cold, and on a
        # loaded machine four fresh workers may take many seconds before one runs a job.
        finished, progressed = 0, time.monotonic()
        while len(killed) < 20:
            now_done = done()
            if now_done > finished:
                finished, progressed = now_done, time.monotonic()
            assert time.monotonic() < progressed + 90, _stalled(url, tmp_path, killed, live)
            if total - now_done < JOBS_UNDER_FIRE // 2:  # work left for every kill to land on
                _enqueue(url, JOBS_UNDER_FIRE // 2)
                total += JOBS_UNDER_FIRE // 2
            # spread the kills over the first half of the run, each on a working worker
            if now_done < len(killed) * JOBS_UNDER_FIRE * 0.5 / 20:
                continue
            working = [w for w in live if (tmp_path / "runs" / f"{w.pid}.log").exists()]
            if not working:
                continue
            victim = rng.choice(working)
            left = total - done()
            victim.kill()
            assert victim.wait(10) == -9
            killed.append(victim.pid)
            live.remove(victim)
            live.append(_start(url, tmp_path, "--lease", "3", readiness=readiness))
        assert left > 0, "the run ended before the last kill"
        wait_for(lambda: done() == total, 180, "every job to end", tmp_path / "workers.log")
        for worker in live:  # stopped below once started (one stopped sooner also exits 0)
            readiness.wait(worker, timeout=120, log=tmp_path / "workers.log")
    finally:
        codes = [stop(worker) for worker in live]
    assert codes == [0] * len(live)
    runs = _check_nothing_lost_or_silently_repeated(url, tmp_path, total)
    with psycopg.connect(url) as conn:
        lost_by = [row[0] for row in conn.execute("SELECT worker FROM mf_job_attempts")]
    assert lost_by, "no kill landed while a worker held jobs"
    assert all(any(f":{pid}:" in worker for pid in killed) for worker in lost_by)
    survivors = Counter(
        job_id
        for job_id, done in _executions(tmp_path).items()
        for pid, _ in done
        if pid not in killed
    )
    assert max(survivors.values()) == 1, "a worker that was never killed ran a job twice"
    assert sum(runs.values()) - total <= len(lost_by)


def _stalled(url: str, tmp_path: Path, killed: list[int], live: list[Worker]) -> str:
    """What the run looked like when jobs stopped finishing: for the failure message."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT state, count(*) FROM mf_jobs GROUP BY state").fetchall()
    states: dict[str, int] = dict(rows)
    ran = {w.pid: (tmp_path / "runs" / f"{w.pid}.log").exists() for w in live}
    log = (tmp_path / "workers.log").read_text(errors="replace")[-4000:]
    return (
        f"no job finished for 90 s after {len(killed)} kills, jobs by state {states}, "
        f"live workers (pid: has run a job) {ran}, exit codes {[w.poll() for w in live]}\n"
        f"--- end of the workers' log ---\n{log}"
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A private cluster this module may restart, removed afterwards."""
    made = private_cluster()
    yield made
    made.remove()


def _outage_log(log: str) -> tuple[set[str], set[str]]:
    """The workers that logged a failed database call, and those that logged recovering."""
    failed = set(re.findall(r"worker=(\S+) database failed while", log))
    recovered = set(re.findall(r"worker=(\S+) the database answers again", log))
    return failed, recovered


def _all_recovered(log: str) -> bool:
    """Whether every worker that logged a failed database call has logged recovering."""
    failed, recovered = _outage_log(log)
    return failed <= recovered


def test_workers_carry_on_through_a_database_restart(
    cluster: PrivateCluster, tmp_path: Path, progress: Callable[[str], _Progress]
) -> None:
    """The server goes down mid-run and stays down until a worker has noticed (a reconnecting
    pool could otherwise hide a quick restart from every worker); then it comes back. The
    workers finish the backlog and a batch enqueued only after the outage, every job once."""
    url, jobs, later = fresh_database(cluster), 3000, 500
    workers_log = tmp_path / "workers.log"
    _enqueue(url, jobs)
    workers = [_start(url, tmp_path, "--lease", "3") for _ in range(4)]
    try:
        before = progress(url).done
        wait_for(lambda: before() >= jobs // 4, 120, "a quarter of the jobs")
        cluster.stop("fast")
        wait_for(
            lambda: bool(_outage_log(workers_log.read_text())[0]),
            60,
            "a worker to notice the outage",
            workers_log,
        )
        cluster.start()
        with MailFathom(url) as app:  # work that exists only after the outage
            app.enqueue_many("pg.noop", [{} for _ in range(later)])
        after = progress(url).done  # the first connection died with the server
        wait_for(lambda: after() == jobs + later, 120, "every job to end", workers_log)
        # a worker still waiting out its back-off when the others finished the jobs comes
        # back too: wait for every worker that saw the outage to say so before stopping it
        wait_for(
            lambda: _all_recovered(workers_log.read_text()),
            60,
            "every worker that saw the outage to recover",
            workers_log,
        )
        assert [worker.poll() for worker in workers] == [None] * 4, "a worker died"
    finally:
        codes = [stop(worker) for worker in workers]
    assert codes == [0, 0, 0, 0]
    _check_nothing_lost_or_silently_repeated(url, tmp_path, jobs + later)
    log = workers_log.read_text()
    failed, recovered = _outage_log(log)
    assert failed, log
    assert failed <= recovered, f"{failed - recovered} saw the outage and never recovered"
    assert "Traceback" not in log, log

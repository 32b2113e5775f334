"""Retention under load: claims while finished rows are compacted, and the database's size.

    .venv/bin/python bench/retention.py                     # 50,000 finished rows, SQLite
    .venv/bin/python bench/retention.py --full              # 1,000,000 rows, 1,000,000 jobs
    .venv/bin/python bench/retention.py --finished 200000 --pg-url postgresql://… --json

**Claims while pruning.** A fresh database gets ``--finished`` Succeeded rows, finished
long ago (their retention has passed), and ``--pending`` due jobs. One thread claims
ten at a time and records them succeeded, as a worker's loop does, and times each
claim. In the *pruning* phase a pruner (the worker's, with its batch size and duty cycle)
compacts the finished rows at the same time, and claiming stops when it is done; the
*baseline* phase, on an identical fresh database, claims as many jobs with no pruner.
Reported: jobs claimed per second and the p99 claim time, both phases.

**Size over time.** ``--rounds`` rounds of ``--per-round`` jobs (500-byte payloads)
are enqueued, claimed and completed; the fake clock moves a day per round and a pass
prunes with ``Succeeded`` kept one day. Three runs: retention off, compaction (every job
keyed), and opt-in deletion (keyless jobs). Reported: the size after every round
(SQLite: the file and its WAL after a checkpoint; PostgreSQL: ``pg_total_relation_size``
of the job tables).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import psycopg

from mailfathom import FakeClock, MailFathom
from mailfathom.clock import Clock, SystemClock
from mailfathom.jobs.pruner import WORKER_DUTY, WORKER_IDLE_DUTY

_LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
_SEED_CHUNK = 100_000
_CLAIM = 10
#: Due jobs the claimer enqueues whenever it runs out.
_REFILL = 5000
_LEASE = timedelta(seconds=300)

_SEED = {
    "sqlite": (
        "WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last) "
        "INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, "
        "available_at, attempts, max_attempts, claimed_by, claimed_at, created_at, finished_at) "
        "SELECT 'bench.done', 'default', '{\"pad\":\"' || printf('%.200c', 'x') || '\",\"n\":' "
        "|| i || '}', 0, 'Succeeded', 'done:' || i, :t, 1, 5, 'seed', :t, :t, "
        "strftime('%Y-%m-%dT%H:%M:%S', '2020-01-01', '+' || i || ' seconds') || '.000000+00:00' "
        "FROM n"
    ),
    "postgresql": (
        "INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, "
        "available_at, attempts, max_attempts, claimed_by, claimed_at, created_at, finished_at) "
        "SELECT 'bench.done', 'default', json_build_object('pad', repeat('x', 200), 'n', i), "
        "0, 'Succeeded', 'done:' || i, %(t)s, 1, 5, 'seed', %(t)s, %(t)s, "
        "%(t)s + i * interval '1 second' "
        "FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i"
    ),
}


@dataclass(frozen=True)
class ClaimPhase:
    """One claiming run: how many jobs, how fast, how slow the slowest claims were."""

    phase: str
    jobs: int
    seconds: float
    jobs_per_second: float
    p50_ms: float
    p99_ms: float
    compacted: int


@dataclass
class SizeRun:
    """Bytes after each round for one retention mode."""

    mode: str
    sizes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Result:
    """Everything one run measured."""

    dialect: str
    finished: int
    pending: int
    claims: list[ClaimPhase]
    rounds: int
    per_round: int
    sizes: dict[str, list[int]]


# -- databases ----------------------------------------------------------------------------


@contextmanager
def _database(pg_url: str | None, folder: Path) -> Iterator[str]:
    """A fresh database: a SQLite file in ``folder``, or a schema of its own on ``pg_url``."""
    if pg_url is None:
        path = folder / f"bench-{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        return
    schema = f"mf_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in pg_url else "?"
    try:
        yield f"{pg_url}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _seed(mf: MailFathom, finished: int, pending: int) -> None:
    """``finished`` Succeeded rows finished long ago, and ``pending`` due jobs."""
    sql = _SEED[mf.store.dialect]
    stamp = mf.store.db.time_param(_LONG_AGO)
    for first in range(1, finished + 1, _SEED_CHUNK):
        last = min(first + _SEED_CHUNK - 1, finished)
        with mf.store.db.transaction() as cur:
            cur.execute(sql, {"first": first, "last": last, "t": stamp})
    for start in range(0, pending, 1000):
        mf.enqueue_many("bench.noop", [{"n": n} for n in range(start, min(start + 1000, pending))])


def _size(mf: MailFathom) -> int:
    """The database's size in bytes, as the disk sees it."""
    if mf.store.dialect == "sqlite":
        path = Path(cast(Any, mf.store.db).path)
        with mf.store.db.reading() as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        wal = path.with_name(path.name + "-wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    with mf.store.db.reading() as cur:
        cur.execute(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint AS n FROM pg_class AS c "
            "JOIN pg_namespace AS s ON s.oid = c.relnamespace "
            "WHERE s.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'mf%%'"
        )
        return int(cur.fetchone()["n"])


# -- claims while pruning -----------------------------------------------------------------


@dataclass(frozen=True)
class _Turn:
    """One claim and the recording of its outcomes, on the bench's monotonic clock."""

    began: float
    ended: float
    claim: float
    jobs: int


class _Claimer:
    """A worker's claim loop on a thread: claim ten, record them succeeded, again; when
    the due jobs run low it enqueues more (untimed), so claiming never runs dry."""

    def __init__(self, mf: MailFathom, clock: Clock) -> None:
        self._mf = mf
        self._clock = clock
        self.turns: list[_Turn] = []
        self.stop = threading.Event()
        self.failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._loop, name="bench-claimer")

    def __enter__(self) -> _Claimer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join()
        if self.failed:
            raise self.failed[0]

    def _loop(self) -> None:
        mf, store = self._mf, self._mf.store
        try:
            while not self.stop.is_set():
                now = self._clock.now()
                began = time.perf_counter()
                jobs = store.claims.claim(
                    owner="bench", limit=_CLAIM, now=now, lease_until=now + _LEASE
                )
                claimed = time.perf_counter()
                if jobs:
                    store.claims.record_outcomes(
                        owner="bench",
                        now=self._clock.now(),
                        succeeded=[(j["id"], j["attempts"]) for j in jobs],
                    )
                    self.turns.append(_Turn(began, time.perf_counter(), claimed - began, len(jobs)))
                if len(jobs) < _CLAIM:  # the due jobs ran out: more, outside the timings
                    _enqueue(mf, _REFILL)
        except BaseException as exc:  # reported by __exit__
            self.failed.append(exc)


def _enqueue(mf: MailFathom, n: int) -> None:
    for start in range(0, n, 1000):
        mf.enqueue_many("bench.noop", [{"n": i} for i in range(start, min(start + 1000, n))])


def _phase(name: str, turns: list[_Turn], compacted: int) -> ClaimPhase:
    jobs = sum(t.jobs for t in turns)
    busy = sum(t.ended - t.began for t in turns)
    ordered = sorted(t.claim for t in turns)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
    return ClaimPhase(
        name,
        jobs,
        busy,
        jobs / busy if busy else 0.0,
        statistics.median(ordered) * 1000 if ordered else 0.0,
        p99 * 1000,
        compacted,
    )


def _app(url: str, clock: Clock, **settings: Any) -> MailFathom:
    mf = MailFathom(url, clock=clock, **settings)
    mf.migrate()

    @mf.job("bench.noop")
    def noop(ctx: Any, n: int = 0) -> None:
        pass

    return mf


def measure_claims(
    pg_url: str | None,
    folder: Path,
    finished: int,
    pending: int,
    *,
    window: float = 2.0,
    prune_batch: int | None = None,
    max_seconds: float | None = None,
) -> list[ClaimPhase]:
    """Claims with no pruner and claims while a pruner compacts, A/B in one run.

    One database holds ``finished`` old Succeeded rows and ``pending`` due jobs, and one
    thread claims all along. The pruner (the worker's: its batch size and pacing) runs
    in alternate windows of ``window`` seconds, each a pass cut short when the window
    ends (the next pass carries on where it stopped), until every finished row is
    compacted; a claim belongs to the window it started in. A noisy machine slows both
    phases alike, which two runs one after the other could not promise. ``max_seconds``
    ends the windows sooner (the rows compacted by then are reported)."""
    clock = SystemClock()
    spans: list[tuple[str, float, float]] = []
    compacted = 0
    settings = {} if prune_batch is None else {"prune_batch": prune_batch}
    with _database(pg_url, folder) as url, _app(url, clock, **settings) as mf:
        _seed(mf, finished, pending)
        # as a worker's pruning thread runs it
        pruner = mf.pruner(duty=WORKER_DUTY, idle_duty=WORKER_IDLE_DUTY)
        with _Claimer(mf, clock) as claimer:
            end = None if max_seconds is None else time.perf_counter() + max_seconds
            while True:
                began = time.perf_counter()
                claimer.stop.wait(window)  # the baseline window: no pruner
                spans.append(("baseline", began, time.perf_counter()))
                if compacted >= finished or (end is not None and time.perf_counter() > end):
                    break
                cut = threading.Event()
                timer = threading.Timer(window, cut.set)
                began = time.perf_counter()
                timer.start()
                report = pruner.run(cancel=cut)
                timer.cancel()
                spans.append(("pruning", began, time.perf_counter()))
                compacted += report.total
                if not report.total and not cut.is_set():
                    raise RuntimeError(f"the pruner stopped at {compacted:,} of {finished:,} rows")
        turns = claimer.turns
    phases = []
    for name in ("baseline", "pruning"):
        mine = [(a, b) for phase, a, b in spans if phase == name]
        inside = [t for t in turns if any(a <= t.began < b for a, b in mine)]
        phases.append(_phase(name, inside, compacted if name == "pruning" else 0))
    return phases


# -- size over time -----------------------------------------------------------------------


def _drain(mf: MailFathom, clock: Clock) -> None:
    """Claim and complete every due job, a hundred at a time."""
    while True:
        now = clock.now()
        jobs = mf.store.claims.claim(owner="bench", limit=100, now=now, lease_until=now + _LEASE)
        if not jobs:
            return
        mf.store.claims.record_outcomes(
            owner="bench", now=clock.now(), succeeded=[(j["id"], j["attempts"]) for j in jobs]
        )


def measure_sizes(
    pg_url: str | None,
    folder: Path,
    rounds: int,
    per_round: int,
    *,
    modes: list[str] = ["off", "compact", "delete"],  # noqa: B006 - never mutated
    vacuum: bool = False,
) -> list[SizeRun]:
    """Bytes after each round with retention off, compacting, and deleting keyless rows.

    ``vacuum`` (PostgreSQL): a plain ``VACUUM`` of the job tables after every round, in
    every mode, standing in for an autovacuum that keeps up (a run of minutes is shorter
    than autovacuum's own pace)."""
    runs = []
    for mode in modes:
        clock = FakeClock(_LONG_AGO)
        settings: dict[str, Any] = {"retention": {"Succeeded": "1d"}}
        if mode == "delete":
            settings["retention_delete_keyless"] = True
        run = SizeRun(mode)
        with _database(pg_url, folder) as url, _app(url, clock, **settings) as mf:
            pad = "x" * 500
            for r in range(rounds):
                keys = None if mode == "delete" else [f"job:{r}:{n}" for n in range(per_round)]
                for start in range(0, per_round, 1000):
                    chunk = range(start, min(start + 1000, per_round))
                    mf.enqueue_many(
                        "bench.noop",
                        [{"n": n, "pad": pad} for n in chunk],
                        idempotency_keys=None if keys is None else keys[start : chunk.stop],
                    )
                _drain(mf, clock)
                clock.advance(86400 + 1)
                if mode != "off":
                    mf.prune()
                if vacuum and mf.store.dialect == "postgresql":
                    with mf.store.db.reading() as cur:  # autocommit: VACUUM needs it
                        cur.execute("VACUUM mf_jobs, mf_job_attempts")
                run.sizes.append(_size(mf))
                print(
                    f"size {mode} round {r + 1}: {run.sizes[-1]:,} B", file=sys.stderr, flush=True
                )
        runs.append(run)
    return runs


def _modes(given: str) -> list[str]:
    modes = [m.strip() for m in given.split(",") if m.strip()]
    wrong = sorted(set(modes) - {"off", "compact", "delete"})
    if wrong:
        raise SystemExit(f"--modes: {wrong} are not size runs; choose among off, compact, delete")
    return modes


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; print a summary (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="1,000,000 rows and jobs")
    parser.add_argument("--finished", type=int, help="finished rows to compact (default 50,000)")
    parser.add_argument("--pending", type=int, help="due jobs to claim (default 20,000)")
    parser.add_argument(
        "--rounds", type=int, help="size rounds: batches a simulated day apart (default 10)"
    )
    parser.add_argument("--per-round", type=int, help="jobs per size round (default 2,000)")
    parser.add_argument("--pg-url", default=None, help="PostgreSQL admin URL (default: SQLite)")
    parser.add_argument("--data-dir", type=Path, default=None, help="folder for SQLite files")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--sizes-only", action="store_true", help="skip the claim phases")
    parser.add_argument("--claims-only", action="store_true", help="skip the size rounds")
    parser.add_argument(
        "--window", type=float, default=2.0, help="seconds per A/B window (default 2)"
    )
    parser.add_argument(
        "--prune-batch", type=int, default=None, help="the pruner's batch (default: the setting's)"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="end the claim windows after this long"
    )
    parser.add_argument(
        "--modes",
        default="off,compact,delete",
        help="size runs to make, of off, compact, delete (default all three)",
    )
    parser.add_argument(
        "--pg-vacuum", action="store_true", help="PostgreSQL: VACUUM after every size round"
    )
    options = parser.parse_args(argv)
    full = options.full
    finished = options.finished or (1_000_000 if full else 50_000)
    pending = options.pending or (20_000 if full else 5_000)
    rounds = options.rounds or (100 if full else 10)
    per_round = options.per_round or (10_000 if full else 2_000)
    with tempfile.TemporaryDirectory(prefix="mailfathom-retention-", dir=options.data_dir) as d:
        folder = Path(d)
        claims = (
            []
            if options.sizes_only
            else measure_claims(
                options.pg_url,
                folder,
                finished,
                pending,
                window=options.window,
                prune_batch=options.prune_batch,
                max_seconds=options.max_seconds,
            )
        )
        for phase in claims:  # as soon as known: a long run stopped later keeps them
            print(json.dumps(asdict(phase)), file=sys.stderr, flush=True)
        modes = [] if options.claims_only else _modes(options.modes)
        sizes = measure_sizes(
            options.pg_url, folder, rounds, per_round, modes=modes, vacuum=options.pg_vacuum
        )
    result = Result(
        "postgresql" if options.pg_url else "sqlite",
        finished,
        pending,
        claims,
        rounds,
        per_round,
        {run.mode: run.sizes for run in sizes},
    )
    if options.json:
        print(json.dumps(asdict(result)))
        return 0
    print(f"{result.dialect}: {finished:,} finished rows, claims of {_CLAIM}")
    for phase in claims:
        print(
            f"  {phase.phase:9} {phase.jobs:>9,} jobs {phase.jobs_per_second:>9,.0f} jobs/s "
            f"p50 {phase.p50_ms:6.2f} ms  p99 {phase.p99_ms:6.2f} ms  compacted {phase.compacted:,}"
        )
    print(f"size after each of {rounds} rounds of {per_round:,} jobs (MB):")
    for run in sizes:
        shown = " ".join(f"{size / 1e6:.1f}" for size in run.sizes)
        print(f"  {run.mode:8} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rate limits on every store, with the injected clock: at most N starts in any window
of the rate's length (a sliding window, exact), each attempt of a retried job counted,
nothing claimed over the rate, other kinds claimed meanwhile."""

from __future__ import annotations

from datetime import timedelta

from mailfathom import JobState, MailFathom
from mailfathom.clock import FakeClock
from mailfathom.store.base import FailedAttempt
from mailfathom.testing import claim
from raw_database import raw_reading

LEASE = timedelta(seconds=30)


def kinds(mf: MailFathom, limit: int = 100) -> list[str]:
    """Kinds of the jobs one claim takes, sorted."""
    return sorted(job.kind for job in claim(mf, "w", limit, LEASE))


def succeed_all(mf: MailFathom) -> None:
    held = [(job.id, job.attempts) for job in mf.jobs.list(state=JobState.CLAIMED)]
    mf.store.claims.record_outcomes(owner="w", now=mf.clock.now(), succeeded=held)


def test_a_sliding_window_never_lets_more_than_n_start(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("rated", rate="3/min")
    def rated(ctx: object) -> None: ...

    mf.job("free")(lambda ctx: None)
    mf.limits.sync()
    mf.enqueue_many("rated", [{}] * 20)
    mf.enqueue_many("free", [{}] * 2)
    assert kinds(mf) == ["free"] * 2 + ["rated"] * 3  # other kinds meanwhile
    succeed_all(mf)
    clock.advance(30)
    assert kinds(mf) == []  # 3 started in the last minute
    clock.advance(29.999)
    assert kinds(mf) == []  # still inside the window of the first three
    clock.advance(0.001)
    assert kinds(mf) == ["rated"] * 3  # exactly one window later: three more
    succeed_all(mf)
    # a fixed window would let 3 more through at the minute's boundary: ours does not
    clock.advance(59.999)
    assert kinds(mf) == []
    clock.advance(0.001)
    assert len(kinds(mf, limit=1)) == 1  # a claim for fewer takes fewer starts
    assert len(kinds(mf)) == 2


def test_every_start_in_any_window_is_counted(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("rated", rate="5/10s")
    def rated(ctx: object) -> None: ...

    mf.limits.sync()
    mf.enqueue_many("rated", [{}] * 200)
    starts = []
    for _ in range(200):  # a claim every 0.5 s for 100 s
        for _ in kinds(mf):
            starts.append(clock.now())
        succeed_all(mf)
        clock.advance(0.5)
    assert len(starts) == 50  # 5 per 10 s over 100 s: the rate used in full
    for first in starts:  # any window of 10 s holds at most 5 starts
        assert sum(first <= at < first + timedelta(seconds=10) for at in starts) <= 5


def test_each_attempt_of_a_retried_job_counts(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("rated", rate="2/min")
    def rated(ctx: object) -> None: ...

    mf.limits.sync()
    (job,) = mf.enqueue_many("rated", [{}])
    mf.enqueue_many("rated", [{}] * 5)
    for _ in range(2):
        claimed = [j for j in claim(mf, "w", 1, LEASE)]
        assert len(claimed) == 1
        failure = FailedAttempt(
            job_id=claimed[0].id,
            attempt=claimed[0].attempts,
            outcome="Failed",
            failure_class="Transient",
            error_type="E",
            message="again",
            traceback=None,
            started_at=clock.now(),
            retry_at=clock.now(),  # due again at once
        )
        mf.store.claims.record_outcomes(owner="w", now=clock.now(), failed=[failure])
    assert mf.jobs.get(job.id).attempts == 2
    assert kinds(mf) == []  # two attempts of one job used the two starts
    clock.advance(60)
    assert kinds(mf) == ["rated"] * 2


def test_per_key_rate_and_a_key_of_its_own(mf: MailFathom, clock: FakeClock) -> None:
    mf.limit_kind("deliver", rate_per_key="2/s", key_limits={"gmail.com": {"rate": "5/s"}})
    mf.limits.sync()
    keys = ["gmail.com"] * 10 + ["example.org"] * 10
    mf.queue.enqueue_many("deliver", [{}] * len(keys), limit_keys=keys)
    got = [job.limit_key or "" for job in claim(mf, "w", 100, LEASE)]
    assert sorted(got) == ["example.org"] * 2 + ["gmail.com"] * 5
    succeed_all(mf)
    clock.advance(0.5)
    assert kinds(mf) == []
    clock.advance(0.5)
    assert len(kinds(mf)) == 7
    (usage,) = mf.limits.usage()
    by_key = {row["key"]: row for row in usage["keys"]}
    assert by_key["gmail.com"]["starts_in_window"] == 5
    assert by_key["gmail.com"]["rate"] == {"count": 5, "window_seconds": 1.0}
    assert by_key["example.org"]["starts_in_window"] == 2 and by_key["example.org"]["blocked"]


def test_the_starts_log_is_trimmed_past_the_window(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("rated", rate="10/s")
    def rated(ctx: object) -> None: ...

    mf.limits.sync()
    mf.enqueue_many("rated", [{}] * 30)
    for _ in range(3):
        kinds(mf)
        succeed_all(mf)
        clock.advance(1)
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM mf_flow_starts")
        assert int(cur.fetchone()["n"]) == 10  # the two earlier windows are gone

"""The conditions in the queue's SQL that keep a stale worker, a crash or a lock from doing harm.

Each test drives the store methods the worker itself calls (``record_outcomes``,
``renew_leases``, the reaping ``claim``) on both stores:

- an outcome or a renewal is written only for the (id, attempt) the lease owner holds —
  another owner, or the same owner at an attempt it lost, changes nothing;
- the reaper dead-letters a job whose lost attempt was the last of its budget (and only
  then: a requeued job has a fresh budget);
- on PostgreSQL a claim skips rows another transaction holds instead of waiting.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from mailfathom import FailureClass, FakeClock, JobState, MailFathom
from mailfathom.clock import DEFAULT_CLOCK_SKEW
from mailfathom.jobs.model import Job
from mailfathom.store.base import FailedAttempt
from mailfathom.testing import claim
from reaping import reap

LEASE = timedelta(seconds=30)


def _failure(job: Job, *, retry: bool, clock: FakeClock) -> FailedAttempt:
    return FailedAttempt(
        job_id=job.id,
        attempt=job.attempts,
        outcome="Failed",
        failure_class="Transient" if retry else "Permanent",
        error_type="RuntimeError",
        message="boom",
        traceback=None,
        started_at=job.claimed_at,
        retry_at=clock.now() if retry else None,
    )


def _lost_to_another_owner(mf: MailFathom, clock: FakeClock) -> tuple[Job, Job]:
    """w1's attempt 1 expired and w2 holds attempt 2."""
    mf.enqueue("k", max_attempts=5)
    (stale,) = claim(mf, "w1", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)  # expired, margin included
    (live,) = claim(mf, "w2", 1, LEASE)
    assert live.id == stale.id and live.attempts == 2
    return stale, live


def _lost_to_itself(mf: MailFathom, clock: FakeClock) -> tuple[Job, Job]:
    """w's attempt 1 expired and w itself holds attempt 2."""
    mf.enqueue("k", max_attempts=5)
    (stale,) = claim(mf, "w", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)  # expired, margin included
    (live,) = claim(mf, "w", 1, LEASE)
    assert live.id == stale.id and live.attempts == 2
    return stale, live


@pytest.mark.parametrize("outcome", ["success", "retry", "dead-letter"])
@pytest.mark.parametrize("loss", ["another_owner", "same_owner"])
def test_an_outcome_is_written_only_for_the_attempt_its_owner_holds(
    mf: MailFathom, clock: FakeClock, outcome: str, loss: str
) -> None:
    if loss == "another_owner":
        stale, live = _lost_to_another_owner(mf, clock)
        stale_owner, live_owner = "w1", "w2"
        # the stale owner reports the live attempt's number: only the owner differs
        stale_pair, stale_attempt = (stale.id, live.attempts), live
    else:
        stale, live = _lost_to_itself(mf, clock)
        stale_owner = live_owner = "w"
        stale_pair, stale_attempt = (stale.id, stale.attempts), stale
    before = mf.jobs.get(live.id)
    attempts_before = mf.jobs.attempts(live.id)
    if outcome == "success":
        lost = mf.store.claims.record_outcomes(
            owner=stale_owner, now=clock.now(), succeeded=[stale_pair]
        )
    else:
        failure = _failure(stale_attempt, retry=outcome == "retry", clock=clock)
        lost = mf.store.claims.record_outcomes(owner=stale_owner, now=clock.now(), failed=[failure])
    assert lost == {live.id}, "a stale outcome was written"
    assert mf.jobs.get(live.id) == before
    assert mf.jobs.attempts(live.id) == attempts_before
    # the attempt that is held is still the one that counts
    assert (
        mf.store.claims.record_outcomes(
            owner=live_owner, now=clock.now(), succeeded=[(live.id, live.attempts)]
        )
        == set()
    )
    assert mf.jobs.get(live.id).state is JobState.SUCCEEDED


@pytest.mark.parametrize("loss", ["another_owner", "same_owner"])
def test_a_lease_is_renewed_only_for_the_attempt_its_owner_holds(
    mf: MailFathom, clock: FakeClock, loss: str
) -> None:
    if loss == "another_owner":
        stale, live = _lost_to_another_owner(mf, clock)
        stale_owner, stale_pair = "w1", (stale.id, live.attempts)
    else:
        stale, live = _lost_to_itself(mf, clock)
        stale_owner, stale_pair = "w", (stale.id, stale.attempts)
    before = mf.jobs.get(live.id)
    clock.advance(5)
    renewed, aborts = mf.store.claims.renew_leases(
        owner=stale_owner, held=[stale_pair], lease_until=clock.now() + LEASE
    )
    assert (renewed, aborts) == (set(), {})
    assert mf.jobs.get(live.id) == before


def test_the_reaper_dead_letters_a_lost_last_attempt(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("k", max_attempts=2)
    for _ in range(2):
        claim(mf, "w", 1, LEASE, reap=False)
        clock.advance(LEASE + DEFAULT_CLOCK_SKEW)  # expired, margin included
        assert reap(mf.store, now=clock.now()) == 1
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.finished_at == clock.now()
    assert dead.failure_class is FailureClass.TRANSIENT
    assert dead.failure_reason == "lease expired: worker w stopped renewing it"
    assert claim(mf, "w", 1, LEASE) == []


def test_a_requeued_job_has_a_fresh_budget_for_the_reaper(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("k", max_attempts=2)

    def lose_an_attempt() -> JobState:
        (claimed,) = claim(mf, "w", 1, LEASE, reap=False)
        clock.advance(LEASE + DEFAULT_CLOCK_SKEW)  # expired, margin included
        assert reap(mf.store, now=clock.now()) == 1
        return mf.jobs.get(claimed.id).state

    assert [lose_an_attempt(), lose_an_attempt()] == [JobState.PENDING, JobState.DEAD_LETTERED]
    mf.jobs.requeue(job.id, actor="ops")
    # attempts 3 and 4 are the new budget's first and last
    assert [lose_an_attempt(), lose_an_attempt()] == [JobState.PENDING, JobState.DEAD_LETTERED]
    assert mf.jobs.get(job.id).attempts == 4


def test_a_claim_skips_jobs_another_transaction_holds(
    postgres_schema_url: str, clock: FakeClock
) -> None:
    """PostgreSQL: a row locked elsewhere is skipped at once, never waited for."""
    with MailFathom(postgres_schema_url, clock=clock) as mf:
        mf.migrate()
        first = mf.enqueue("k", queue="a", priority=1)
        second = mf.enqueue("k", queue="a")
        with psycopg.connect(postgres_schema_url) as holder:
            holder.execute("SELECT id FROM mf_jobs WHERE id = %s FOR UPDATE", (first.id,))
            claimed: dict[str, list[int]] = {}

            def claim_as(name: str, queues: list[str] | None) -> None:
                jobs = claim(mf, name, 5, LEASE, queues=queues)
                claimed[name] = [j.id for j in jobs]

            for name, queues in (("all", None), ("in queues", ["a"])):
                claimer = threading.Thread(target=claim_as, args=(name, queues), daemon=True)
                claimer.start()
                claimer.join(5)
                assert not claimer.is_alive(), f"the claim ({name}) waited for the locked row"
                if name == "all":
                    assert claimed[name] == [second.id]
                    mf.store.claims.record_outcomes(
                        owner="all", now=clock.now(), succeeded=[(second.id, 1)]
                    )
                else:
                    assert claimed[name] == []
            holder.rollback()
        (got,) = claim(mf, "w", 5, LEASE)
        assert got.id == first.id

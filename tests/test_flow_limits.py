"""Flow control on every store: concurrency limits per kind, queue and key, enforced by
the claim (a job that may not start is not claimed and spends nothing), never blocking
other kinds or keys; and the usage the console shows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mailfathom import JobState, MailFathom, testing
from mailfathom.clock import FakeClock

LEASE = timedelta(seconds=30)


def claim(mf: MailFathom, limit: int = 100, owner: str = "w1") -> list[tuple[str, str | None]]:
    """Claim up to ``limit`` jobs; (kind, limit key) of each."""
    jobs = testing.claim(mf, owner, limit, LEASE)
    return sorted(((job.kind, job.limit_key) for job in jobs), key=lambda p: (p[0], p[1] or ""))


def finish(mf: MailFathom, owner: str = "w1") -> None:
    """Every job ``owner`` holds succeeds."""
    held = [
        (job.id, job.attempts)
        for job in mf.jobs.list(state=JobState.CLAIMED)
        if job.lease_owner == owner
    ]
    mf.store.claims.record_outcomes(owner=owner, now=mf.clock.now(), succeeded=held)


def test_max_running_holds_a_kind_and_leaves_other_kinds_alone(mf: MailFathom) -> None:
    @mf.job("limited", max_running=2)
    def limited(ctx: object) -> None: ...

    mf.job("free")(lambda ctx: None)
    mf.limits.sync()
    mf.enqueue_many("limited", [{}] * 5)
    mf.enqueue_many("free", [{}] * 3)
    assert claim(mf) == [("free", None)] * 3 + [("limited", None)] * 2
    assert claim(mf) == []  # two running: nothing more of the kind, however many asked
    pending = mf.jobs.list(state=JobState.PENDING)
    assert len(pending) == 3 and all(job.attempts == 0 for job in pending)  # nothing spent
    finish(mf)
    assert claim(mf) == [("limited", None)] * 2


def test_a_lease_reaped_frees_its_slot_and_counts_until_then(
    mf: MailFathom, clock: FakeClock
) -> None:
    @mf.job("limited", max_running=1)
    def limited(ctx: object) -> None: ...

    mf.limits.sync()
    mf.enqueue_many("limited", [{}] * 2)
    assert claim(mf, owner="dead") == [("limited", None)]
    clock.advance(LEASE - timedelta(seconds=1))
    assert claim(mf) == []  # the silent worker's job still counts
    clock.advance(LEASE + mf.store.clock_skew)
    assert claim(mf) == [("limited", None)]  # reaped in the same claim, then one of the two


def test_per_key_limit_lets_other_keys_through(mf: MailFathom) -> None:
    @mf.job("sync", limit_key=lambda payload: payload["account"], max_running_per_key=1)
    def sync(ctx: object, account: int) -> None: ...

    mf.limits.sync()
    # a backlog of one key in front must not hide the other keys behind it
    mf.enqueue_many("sync", [{"account": 1}] * 50 + [{"account": 2}, {"account": "x"}])
    assert claim(mf, limit=10) == [("sync", "1"), ("sync", "2"), ("sync", "x")]
    assert claim(mf, limit=10) == []
    finish(mf)
    assert claim(mf, limit=10) == [("sync", "1")]


def test_key_limits_override_the_per_key_default(mf: MailFathom) -> None:
    mf.limit_kind(
        "deliver",
        max_running_per_key=1,
        key_limits={"gmail.com": {"max_running": 3}},
    )
    mf.limits.sync()
    keys = ["gmail.com"] * 5 + ["example.org"] * 5 + [None] * 2
    mf.queue.enqueue_many("deliver", [{}] * len(keys), limit_keys=keys)
    assert (
        claim(mf)
        == [("deliver", None)] * 2 + [("deliver", "example.org")] + [("deliver", "gmail.com")] * 3
    )


def test_queue_limit_covers_every_kind_in_it(mf: MailFathom) -> None:
    mf.limit_queue("mail", max_running=3)
    mf.limits.sync()
    mf.enqueue_many("a", [{}] * 3, queue="mail")
    mf.enqueue_many("b", [{}] * 3, queue="mail")
    mf.enqueue_many("c", [{}] * 2)
    got = claim(mf)
    assert [kind for kind, _ in got].count("c") == 2
    assert len(got) == 5
    assert claim(mf) == []
    # a worker of the limited queue alone obeys it too
    finish(mf)
    jobs = testing.claim(mf, "w2", 100, LEASE, queues=["mail"])
    assert len(jobs) == 3


def test_per_queue_slots_claim_up_to_each_queue_limit(mf: MailFathom) -> None:
    mf.enqueue_many("a", [{}] * 5, queue="mail")
    mf.enqueue_many("b", [{}] * 5)
    rows = mf.store.claims.claim(
        owner="w",
        limit=0,
        now=mf.clock.now(),
        lease_until=mf.clock.now() + LEASE,
        queue_limits={"mail": 2, "default": 3},
    )
    assert sorted(row["queue"] for row in rows) == ["default"] * 3 + ["mail"] * 2


def test_limit_key_is_validated_at_enqueue_and_nothing_is_enqueued(mf: MailFathom) -> None:
    from mailfathom.errors import InvalidInput

    @mf.job("keyed", limit_key=lambda payload: payload["account"], max_running_per_key=1)
    def keyed(ctx: object, account: object) -> None: ...

    with pytest.raises(InvalidInput, match=r"raised KeyError.*payload #1.*nothing was enqueued"):
        mf.enqueue_many("keyed", [{"account": 1}, {"other": 2}])
    with pytest.raises(InvalidInput, match=r"must be a str or an int, not list"):
        mf.enqueue("keyed", {"account": [1]})
    with pytest.raises(InvalidInput, match=r"must be a str or an int, not bool"):
        mf.enqueue("keyed", {"account": True})
    assert mf.jobs.counts().get(JobState.PENDING, 0) == 0
    job = mf.enqueue("keyed", {"account": 7})
    assert job.limit_key == "7" and mf.jobs.get(job.id).limit_key == "7"


def test_a_kind_without_limits_in_the_code_loses_its_stored_limits(
    mf: MailFathom, database_url: str, clock: FakeClock
) -> None:
    @mf.job("k", max_running=2, rate="10/min")
    def k(ctx: object) -> None: ...

    mf.limits.sync()
    assert [row.name for row in mf.limits.stored()] == ["kind:k"]
    with MailFathom(database_url, clock=clock) as other:

        @other.job("k")
        def k2(ctx: object) -> None: ...

        other.limits.sync()
        assert other.limits.stored() == []


def test_usage_reports_values_use_and_waiting_jobs(mf: MailFathom) -> None:
    @mf.job(
        "sync",
        max_running=3,
        rate="100/min",
        limit_key=lambda payload: payload["account"],
        max_running_per_key=1,
    )
    def sync(ctx: object, account: int) -> None: ...

    mf.limits.sync()
    jobs = mf.enqueue_many("sync", [{"account": 1}, {"account": 1}, {"account": 2}])
    claim(mf)
    (usage,) = mf.limits.usage()
    assert usage["name"] == "kind:sync"
    assert usage["max_running"] == 3 and usage["rate"] == {"count": 100, "window_seconds": 60.0}
    assert usage["running"] == 2 and usage["starts_in_window"] == 2
    assert usage["blocked"] is False
    assert usage["waiting"] == [jobs[1].id]  # held back by its key's running job
    by_key = {row["key"]: row for row in usage["keys"]}
    assert by_key["1"]["running"] == 1 and by_key["1"]["blocked"] is True


def test_a_burst_worker_drains_a_limited_kind(mf: MailFathom) -> None:
    """A claim that a limit held back while this worker's own jobs ran is no sign that
    nothing is due: the burst goes on until every job ran."""

    @mf.job("limited", max_running=2)
    def limited(ctx: object) -> None: ...

    for _ in range(3):  # each burst has many chances for a claim to come back empty
        mf.enqueue_many("limited", [{}] * 200)
        assert mf.worker(concurrency=4).run(burst=True) == 200
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 600

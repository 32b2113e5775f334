"""A limit holds a job back, never reorders: on every store, the claim takes due jobs in
one claim order (priority, then due time, then id) across limited and unlimited kinds,
leaving out only what a limit does not let start now."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailfathom import JobState, MailFathom
from mailfathom.clock import FakeClock
from mailfathom.testing import claim
from raw_database import raw_transaction

LEASE = timedelta(seconds=30)


def claimed_ids(
    mf: MailFathom, limit: int, queues: list[str] | None = None, lease: timedelta = LEASE
) -> list[int]:
    """Ids of the jobs one claim takes, in claim order."""
    return [job.id for job in claim(mf, "w", limit, lease, queues=queues)]


def test_a_limited_job_of_higher_priority_goes_before_unlimited_ones(mf: MailFathom) -> None:
    @mf.job("limited", max_running=5)
    def limited(ctx: object) -> None: ...

    mf.job("plain")(lambda ctx: None)
    mf.limits.sync()
    plain = [job.id for job in mf.enqueue_many("plain", [{}] * 20)]
    (urgent,) = mf.enqueue_many("limited", [{}], priority=10)
    # nothing of the kind runs: its limit lets the job start, so it goes first
    assert claimed_ids(mf, 5) == [urgent.id, *plain[:4]]
    assert claimed_ids(mf, 5) == plain[4:9]


def test_due_time_then_id_order_limited_and_unlimited_jobs_alike(
    mf: MailFathom, clock: FakeClock
) -> None:
    mf.limit_queue("mail", max_running=10)
    mf.limit_kind("keyed", max_running_per_key=1)
    mf.limits.sync()
    order: list[int] = []
    for n in range(4):
        order += [job.id for job in mf.enqueue_many("plain", [{}] * 2)]
        order += [job.id for job in mf.enqueue_many("sent", [{}], queue="mail")]
        keyed = mf.queue.enqueue_many("keyed", [{}], limit_keys=[f"k{n}"])
        order += [job.id for job in keyed]
        clock.advance(1)
    got = claimed_ids(mf, 3) + claimed_ids(mf, 1) + claimed_ids(mf, 100)
    assert got == order


def test_a_worker_of_some_queues_keeps_the_order_too(mf: MailFathom) -> None:
    mf.limit_queue("mail", max_running=2)
    mf.limits.sync()
    plain = [job.id for job in mf.enqueue_many("plain", [{}] * 5, queue="jobs")]
    mail = [job.id for job in mf.enqueue_many("sent", [{}] * 5, queue="mail", priority=1)]
    assert claimed_ids(mf, 3, queues=["jobs", "mail"]) == [*mail[:2], plain[0]]
    # the limit holds the rest of the mail back: the places go to the next jobs in order
    assert claimed_ids(mf, 3, queues=["jobs", "mail"]) == plain[1:4]


def _email(to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "app@example.net"
    msg["To"] = to
    msg["Subject"] = "hello"
    msg.set_content("hello\n")
    return msg


def test_email_with_domain_limits_is_not_starved_by_plain_jobs(
    database_url: str, clock: FakeClock
) -> None:
    """With domain_limits every delivery is limited: it still takes its turn in claim
    order while plain work would fill every claim."""
    with MailFathom(
        database_url,
        clock=clock,
        smtp_url="smtp://127.0.0.1:9",
        domain_limits={"*": {"connections": 5}},
    ) as mf:
        mf.migrate()
        mf.limits.sync()  # as a worker does when it starts
        assert [limit.name for limit in mf.limits.stored()] == ["kind:mailfathom.deliver"]
        before = [job.id for job in mf.enqueue_many("plain", [{}] * 10)]
        clock.advance(1)
        email = mf.outbox.record(_email("bob@example.org"))
        clock.advance(1)
        after = [job.id for job in mf.enqueue_many("plain", [{}] * 50)]
        assert email.job_id is not None
        claims = [claimed_ids(mf, 4) for _ in range(3)]
        assert claims == [before[:4], before[4:8], [*before[8:], email.job_id, after[0]]]


# -- the claimed sequence is the global order, filtered by what the limits allow ----------

KINDS = ("plain", "cap", "keyed", "rated")
RATE = 3
WINDOW = timedelta(minutes=1)


@dataclass
class _Job:
    id: int
    kind: str
    queue: str
    priority: int
    due: datetime
    key: str | None


def _allowed(job: _Job, running: Counter[str], starts: list[datetime], now: datetime) -> bool:
    """Whether the limits of the model (those ``_limits`` declares) let ``job`` start."""
    if job.kind == "cap" and running["cap"] >= 2:
        return False
    if job.kind == "keyed" and job.key is not None and running[f"keyed|{job.key}"] >= 1:
        return False
    if job.kind == "rated" and sum(now - WINDOW < at for at in starts) >= RATE:
        return False
    return not (job.queue == "q" and running["queue:q"] >= 3)


def _count(job: _Job, running: Counter[str], delta: int) -> None:
    running[job.kind] += delta
    running[f"keyed|{job.key}"] += delta if job.kind == "keyed" and job.key else 0
    running["queue:q"] += delta if job.queue == "q" else 0


def _limits(mf: MailFathom) -> None:
    mf.limit_kind("cap", max_running=2)
    mf.limit_kind("keyed", max_running_per_key=1)
    mf.limit_kind("rated", rate=f"{RATE}/min")
    mf.limit_queue("q", max_running=3)
    mf.limits.sync()


def _reset(mf: MailFathom) -> None:
    with raw_transaction(mf) as cur:
        cur.execute("DELETE FROM mf_flow_starts")
        cur.execute("DELETE FROM mf_jobs")


_jobs = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(["default", "q"]),
        st.integers(0, 2),  # priority
        st.integers(0, 3),  # seconds before now it became due
        st.sampled_from([None, "a", "b"]),  # limit key
    ),
    min_size=1,
    max_size=25,
)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), st.integers(1, 6), st.sampled_from([None, ["q"], ["default"]])),
        st.tuples(st.just("finish"), st.integers(1, 3), st.none()),
        st.tuples(st.just("wait"), st.integers(10, 40), st.none()),
    ),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=25,
    deadline=None,
    # one app serves every example: each starts from empty tables (_reset)
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(jobs=_jobs, steps=_steps)
def test_the_claimed_sequence_is_the_global_order_filtered_by_the_limits(
    mf: MailFathom,
    clock: FakeClock,
    jobs: list[tuple[str, str, int, int, str | None]],
    steps: list[tuple[str, int, list[str] | None]],
) -> None:
    if not mf.limits.stored():
        _limits(mf)
    _reset(mf)
    clock.advance(WINDOW)  # the starts of earlier examples are forgotten with them
    now = clock.now()
    model: list[_Job] = []
    for kind, queue, priority, ago, key in jobs:
        due_at = now - timedelta(seconds=ago)
        (enqueued,) = mf.queue.enqueue_many(
            kind, [{}], queue=queue, priority=priority, run_at=due_at, limit_keys=[key]
        )
        model.append(_Job(enqueued.id, kind, queue, priority, due_at, key))
    pending = {job.id: job for job in model}
    held: list[_Job] = []  # claimed, in claim order
    running: Counter[str] = Counter()
    starts: list[datetime] = []
    for action, n, queues in steps:
        now = clock.now()
        if action == "wait":
            clock.advance(n)
        elif action == "finish":
            done, held = held[:n], held[n:]
            mf.store.claims.record_outcomes(
                owner="w", now=now, succeeded=[(job.id, 1) for job in done]
            )
            for job in done:
                _count(job, running, -1)
        else:
            expected: list[_Job] = []
            due = [
                job
                for job in pending.values()
                if job.due <= now and (queues is None or job.queue in queues)
            ]
            for job in sorted(due, key=lambda j: (-j.priority, j.due, j.id)):
                if len(expected) == n:
                    break
                if _allowed(job, running, starts, now):
                    expected.append(job)
                    _count(job, running, +1)
                    starts += [now] if job.kind == "rated" else []
            # leases outlast the example: nothing is reaped behind the model's back
            assert claimed_ids(mf, n, queues, timedelta(days=1)) == [j.id for j in expected]
            for job in expected:
                del pending[job.id]
            held += expected
    assert {job.id for job in mf.jobs.list(state=JobState.CLAIMED)} == {j.id for j in held}

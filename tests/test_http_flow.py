"""How many requests an HTTP transport has in flight, on every store, measured at the fake
provider on loopback: ``HttpJsonTransport(connections=N)`` never has more than N
requests out at once however many delivering threads want one (the others wait, the
way ``smtp_sessions`` bounds SMTP sessions); and per-domain throttling
(``domain_limits``) holds for HTTP deliveries as for SMTP ones, fleet-wide, without
spending an attempt on what it holds back."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from email.message import EmailMessage

import pytest

from fake_provider import FakeProvider
from mailfathom import HttpJsonTransport, JobState, MailFathom, OutgoingEmailStage, Worker
from mailfathom.clock import FakeClock

#: gmail.com's rate does not bind the few messages of the test.
CONNECTIONS = {"gmail.com": {"rate": "20/s", "connections": 2}, "*": {"connections": 5}}
THROTTLE = {"gmail.com": {"rate": "2/s", "connections": 2}, "*": {"connections": 5}}


def message(*to: str) -> EmailMessage:
    """A small message from us to ``to``."""
    msg = EmailMessage()
    msg["From"] = "app@example.net"
    msg["To"] = ", ".join(to)
    msg["Subject"] = "hello"
    msg.set_content("hello\n")
    return msg


def app(
    database_url: str, clock: FakeClock, transport: HttpJsonTransport, **settings: object
) -> MailFathom:
    """A migrated app delivering through ``transport``."""
    mf = MailFathom(database_url, clock=clock, transport=transport, **settings)  # type: ignore[arg-type]
    mf.migrate()
    return mf


@pytest.fixture
def gated(provider: FakeProvider) -> Iterator[FakeProvider]:
    """The fake provider holding every answer until the test opens its gate."""
    provider.gate.clear()
    yield provider
    provider.gate.set()


def run_in_threads(workers: list[Worker]) -> list[threading.Thread]:
    """Start each worker draining in a thread of its own."""
    for worker in workers:
        worker.signals.init()
    threads = [threading.Thread(target=lambda w=w: w.run(burst=True)) for w in workers]
    for thread in threads:
        thread.start()
    return threads


def finish(workers: list[Worker], threads: list[threading.Thread]) -> None:
    """Wait until every worker drained (its ``stopped`` signal), then join its thread."""
    for worker in workers:
        worker.signals.stopped.wait(60)
    for thread in threads:
        thread.join(30)


def test_connections_bounds_the_requests_in_flight_and_the_other_threads_wait(
    database_url: str, clock: FakeClock, gated: FakeProvider
) -> None:
    transport = HttpJsonTransport(gated.url, connections=3, timeout=30.0)
    transport.waiting.init()
    mf = app(database_url, clock, transport)
    try:
        records = [mf.outbox.record(message(f"u{i}@example.com")) for i in range(20)]
        workers = [mf.worker(concurrency=8)]  # 8 delivering threads for 3 connections
        threads = run_in_threads(workers)
        try:
            gated.wait_in_flight(lambda p: p.in_flight == 3)
            # the 5 other threads are inside submit, waiting for a connection ...
            waiting = {transport.waiting.wait(30) for _ in range(5)}
            assert len(waiting) == 5
            # ... so the provider still sees 3, and nothing more was sent
            assert gated.in_flight == 3 and len(gated.requests) == 3
            begun = [mf.outbox.get(r.id).transmission_begun_at for r in records]
            assert sum(b is not None for b in begun) == 3
            gated.gate.set()
            finish(workers, threads)
        finally:
            gated.gate.set()
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(30)
        assert gated.most == 3  # under load, never more than the bound
        assert len(gated.accepted) == 20
        assert all(mf.outbox.get(r.id).stage is OutgoingEmailStage.SENT for r in records)
    finally:
        mf.close()


def test_connections_per_domain_hold_for_http_across_workers_and_other_domains_flow(
    database_url: str, clock: FakeClock, gated: FakeProvider
) -> None:
    apps = [
        app(database_url, clock, HttpJsonTransport(gated.url), domain_limits=CONNECTIONS)
        for _ in range(2)
    ]
    try:
        records = [apps[0].outbox.record(message(f"u{i}@gmail.com")) for i in range(4)]
        records += [apps[0].outbox.record(message(f"u{i}@example.org")) for i in range(7)]
        workers = [mf.worker(concurrency=6) for mf in apps]  # 12 slots: only limits hold
        threads = run_in_threads(workers)
        try:
            gated.wait_in_flight(
                lambda p: dict(p.in_flight_by_domain) == {"gmail.com": 2, "example.org": 5}
            )
            held = apps[0].jobs.list(state=JobState.PENDING)
            assert len(held) == 4 and all(job.attempts == 0 for job in held)
            assert Counter(job.limit_key for job in held) == {"gmail.com": 2, "example.org": 2}
            emails = [apps[0].outbox.get(r.id) for r in records]
            assert sum(e.attempts == 0 for e in emails) == 4  # held back: no attempt spent
            gated.gate.set()
            finish(workers, threads)
        finally:
            gated.gate.set()
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(30)
        assert gated.done_by_domain == {"gmail.com": 4, "example.org": 7}
        assert gated.most_by_domain == {"gmail.com": 2, "example.org": 5}  # fleet-wide
        assert all(apps[0].outbox.get(r.id).stage is OutgoingEmailStage.SENT for r in records)
        assert all(apps[0].outbox.get(r.id).attempts == 1 for r in records)
    finally:
        for mf in apps:
            mf.close()


def test_a_domain_rate_holds_http_deliveries_back_without_an_attempt(
    database_url: str, clock: FakeClock, provider: FakeProvider
) -> None:
    mf = app(database_url, clock, HttpJsonTransport(provider.url), domain_limits=THROTTLE)
    try:
        records = [mf.outbox.record(message(f"u{i}@gmail.com")) for i in range(5)]
        records += [mf.outbox.record(message(f"u{i}@yahoo.com")) for i in range(3)]

        def sent_to(domain: str) -> int:
            return sum(seen.body["to"][0].endswith(f"@{domain}") for seen in provider.requests)

        per_second = []
        for _ in range(3):
            before = sent_to("gmail.com")
            mf.worker().run(burst=True)
            per_second.append(sent_to("gmail.com") - before)
            if len(per_second) == 1:
                assert sent_to("yahoo.com") == 3  # not held behind gmail.com
                held = mf.jobs.list(state=JobState.PENDING)
                assert len(held) == 3 and all(job.attempts == 0 for job in held)
            clock.advance(1)
        assert per_second == [2, 2, 1]  # at most "2/s" started in any second
        assert all(mf.outbox.get(r.id).stage is OutgoingEmailStage.SENT for r in records)
    finally:
        mf.close()


def test_a_message_to_several_domains_is_one_request_per_domain(
    database_url: str, clock: FakeClock, provider: FakeProvider
) -> None:
    mf = app(database_url, clock, HttpJsonTransport(provider.url), domain_limits=THROTTLE)
    try:
        recorded = mf.outbox.record(message("a@gmail.com", "b@yahoo.com", "c@gmail.com"))
        assert mf.worker().run(burst=True) == 2
        assert sorted(tuple(seen.body["to"]) for seen in provider.requests) == [
            ("a@gmail.com", "c@gmail.com"),
            ("b@yahoo.com",),
        ]
        assert all(p.stage is OutgoingEmailStage.SENT for p in mf.outbox.parts(recorded.id))
    finally:
        mf.close()

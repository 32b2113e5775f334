"""Prometheus metrics: scraped over real HTTP from the worker's metrics server and the
console, parsed with prometheus_client's parser, after known work on each store."""

from __future__ import annotations

import json
import logging
import os
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from mailfathom import FakeClock, JobContext, JobState, MailFathom, PermanentFailure
from mailfathom.console import Console
from mailfathom.observability import metrics
from mailfathom.observability.gauges import DatabaseGauges
from mailfathom.observability.health import check_store
from mailfathom.observability.server import MetricsServer, serve_worker_metrics
from mailfathom.store.base import WorkerRegistration
from mailfathom.testing import claim
from mailfathom.web.app import create_app
from mailfathom.web.security import Access
from smtp_fixtures import FaultServer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def installed() -> Iterator[metrics.Metrics]:
    """Fresh metrics installed for the test, uninstalled after it."""
    made = metrics.install()
    yield made
    metrics.uninstall()


def scrape(url: str, headers: dict[str, str] | None = None) -> Samples:
    """GET ``url`` and parse it: {(sample name, labels): value}."""
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return parse(text)


def parse(text: str) -> Samples:
    """Every sample of a Prometheus exposition, by name and labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels``; KeyError naming what exists otherwise."""
    key = (name, frozenset(labels.items()))
    if key not in samples:
        near = [dict(lbl) for n, lbl in samples if n == name]
        raise KeyError(f"{name}{labels} not scraped; {name} has {near}")
    return samples[key]


def register_worker(mf: MailFathom, worker_id: str, lease: float = 30.0) -> None:
    registration = WorkerRegistration(
        id=worker_id,
        host="here",
        pid=os.getpid(),
        queues=None,
        kinds=(),
        concurrency=1,
        lease_seconds=lease,
        started_at=mf.clock.now(),
    )
    mf.store.workers.heartbeat(registration, now=mf.clock.now())


def test_worker_metrics_after_known_work(
    mf: MailFathom, clock: FakeClock, installed: metrics.Metrics
) -> None:
    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        pass

    @mf.job("bad")
    def bad(ctx: JobContext) -> None:
        raise PermanentFailure("no")

    mf.enqueue_many("ok", [{} for _ in range(3)])
    mf.enqueue_many("bad", [{}, {}])
    mf.enqueue("ok", {}, queue="idle")  # no worker takes this queue: it waits
    mf.enqueue("ok", {}, hold=True)  # held: Pending, never due
    mf.suppressions.add("gone@example.com", actor="ops", reason="complaint")
    # a job whose worker vanished: its lease expires and the next claim reaps it
    mf.enqueue("ok", {}, queue="lost")
    assert claim(mf, "ghost", 1, timedelta(seconds=5), queues=["lost"])
    clock.advance(60)
    installed.registry.register(DatabaseGauges(mf.store, mf.clock, min_interval=0))
    assert mf.worker(queues=["default", "lost"]).run(burst=True) == 6
    register_worker(mf, "alive-1")

    server = MetricsServer(installed.registry, lambda: check_store(mf.store, mf.clock)).start()
    try:
        samples = scrape(f"http://127.0.0.1:{server.port}/metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=10) as r:
            health = json.loads(r.read())
    finally:
        server.stop()

    attempts = "mailfathom_job_attempts_total"
    assert value(samples, attempts, kind="ok", queue="default", outcome="Succeeded") == 3
    assert value(samples, attempts, kind="bad", queue="default", outcome="Failed") == 2
    assert value(samples, attempts, kind="ok", queue="lost", outcome="Succeeded") == 1
    duration = "mailfathom_job_attempt_duration_seconds_count"
    assert value(samples, duration, kind="ok", queue="default") == 3
    # enqueued at t0, started after the clock moved 60 s: each waited 60 s
    assert value(samples, "mailfathom_job_start_lag_seconds_count", kind="ok", queue="default") == 3
    assert value(samples, "mailfathom_job_start_lag_seconds_sum", kind="ok", queue="default") == 180
    assert value(samples, "mailfathom_job_start_lag_seconds_bucket", kind="bad", queue="default",
                 le="30.0") == 0  # fmt: skip
    assert value(samples, "mailfathom_job_start_lag_seconds_bucket", kind="bad", queue="default",
                 le="60.0") == 2  # fmt: skip

    jobs = "mailfathom_jobs"
    assert value(samples, jobs, state="DeadLettered", queue="default") == 2
    assert value(samples, jobs, state="Pending", queue="default") == 1  # the held one
    assert value(samples, jobs, state="Pending", queue="idle") == 1
    assert value(samples, jobs, state="Claimed", queue="idle") == 0
    # Succeeded and Dropped: recounted every history_interval, the first time inline
    assert value(samples, jobs, state="Succeeded", queue="default") == 3
    assert value(samples, jobs, state="Succeeded", queue="lost") == 1
    assert value(samples, jobs, state="Dropped", queue="default") == 0
    assert value(samples, jobs, state="Succeeded", queue="idle") == 0
    assert 0 <= value(samples, "mailfathom_metrics_history_age_seconds") < 60
    assert value(samples, "mailfathom_oldest_due_job_age_seconds", queue="idle") == 60
    assert value(samples, "mailfathom_oldest_due_job_age_seconds", queue="default") == 0
    assert value(samples, "mailfathom_lease_expiries_total", queue="lost") == 1
    assert value(samples, "mailfathom_lease_expiries_total", queue="default") == 0
    assert value(samples, "mailfathom_workers_alive") == 1
    assert value(samples, "mailfathom_emails", stage="Recorded") == 0
    assert value(samples, "mailfathom_emails_unknown_outcome") == 0
    assert value(samples, "mailfathom_suppressed_addresses", reason="complaint") == 1
    assert value(samples, "mailfathom_suppressed_addresses", reason="hard_bounce") == 0
    assert value(samples, "mailfathom_metrics_database_up") == 1
    assert health == {
        "status": "ok",
        "checks": {
            "database": {"ok": True, "detail": f"{mf.store.dialect} answers"},
            "migrations": health["checks"]["migrations"],
            "kinds": {"ok": True, "detail": health["checks"]["kinds"]["detail"]},
        },
    }
    assert health["checks"]["migrations"]["ok"] is True
    # the live worker (alive-1) runs demo.ok only: the idle queue's job is not its kind
    assert health["checks"]["kinds"]["detail"].startswith(
        "1 due job(s) of kind 'ok' that no live worker handles"
    )
    assert value(samples, "mailfathom_jobs_unhandled", kind="ok") == 1


def test_delivery_metrics_count_replies_and_submissions(
    mail_app: MailFathom, smtp: FaultServer, installed: metrics.Metrics
) -> None:
    mf = mail_app
    installed.registry.register(DatabaseGauges(mf.store, mf.clock, min_interval=0))
    message = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"
    mf.outbox.record(message, sender="a@example.com", recipients=["b@example.com", "c@example.com"])
    mf.worker().run(burst=True)
    assert len(smtp.accepted()) == 1
    server = MetricsServer(installed.registry, lambda: check_store(mf.store, mf.clock)).start()
    try:
        samples = scrape(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.stop()
    assert value(samples, "mailfathom_smtp_replies_total", **{"class": "2xx", "phase": "rcpt"}) == 2
    assert (
        value(samples, "mailfathom_smtp_replies_total", **{"class": "2xx", "phase": "reply"}) == 1
    )
    assert (
        value(samples, "mailfathom_email_submissions_total", transport="smtp", outcome="sent") == 1
    )
    assert value(samples, "mailfathom_emails", stage="Sent") == 1
    assert value(samples, "mailfathom_emails", stage="Recorded") == 0
    assert (
        value(
            samples,
            "mailfathom_job_attempts_total",
            kind="mailfathom.deliver",
            queue="mail",
            outcome="Succeeded",
        )
        == 1
    )


def test_database_gauges_read_once_per_interval(mf: MailFathom) -> None:
    gauges = DatabaseGauges(mf.store, mf.clock, min_interval=3600)
    mf.enqueue("k", {})
    first = {m.name: m for m in gauges.collect()}
    mf.enqueue("k", {})
    second = {m.name: m for m in gauges.collect()}
    assert gauges.reads == 1
    assert [
        s.value for s in first["mailfathom_jobs"].samples if s.labels["state"] == "Pending"
    ] == [1]
    assert [
        s.value for s in second["mailfathom_jobs"].samples if s.labels["state"] == "Pending"
    ] == [1]  # cached: the second job shows only after the interval
    fresh = DatabaseGauges(mf.store, mf.clock, min_interval=0, max_duty=None)
    list(fresh.collect())
    third = {m.name: m for m in fresh.collect()}
    assert fresh.reads == 2
    assert [
        s.value for s in third["mailfathom_jobs"].samples if s.labels["state"] == "Pending"
    ] == [2]


def test_slow_reads_space_themselves_out(mf: MailFathom) -> None:
    # a duty cap this small makes any read, however quick, wait a long time for the next
    capped = DatabaseGauges(mf.store, mf.clock, min_interval=0, history_interval=0, max_duty=1e-9)
    for _ in range(3):
        list(capped.collect())
    assert (capped.reads, capped.recounts) == (1, 1)
    unlimited = DatabaseGauges(mf.store, mf.clock, min_interval=0, max_duty=None)
    for _ in range(3):
        list(unlimited.collect())
    assert unlimited.reads == 3


def test_succeeded_and_dropped_are_recounted_apart_and_in_the_background(
    mf: MailFathom,
) -> None:
    @mf.job("k", max_attempts=1)
    def k(ctx: JobContext, fail: bool = False) -> None:
        if fail:
            raise PermanentFailure("no")

    mf.enqueue("k", {})
    dead = mf.enqueue("k", {"fail": True})
    mf.worker().run(burst=True)
    mf.jobs.drop(dead.id, actor="ops", reason="test")

    def jobs(gauges: DatabaseGauges) -> dict[str, float]:
        (family,) = [m for m in gauges.collect() if m.name == "mailfathom_jobs"]
        return {s.labels["state"]: s.value for s in family.samples}

    slow = DatabaseGauges(mf.store, mf.clock, min_interval=0, history_interval=3600, max_duty=None)
    assert jobs(slow) == {
        "Pending": 0, "Claimed": 0, "DeadLettered": 0, "Succeeded": 1, "Dropped": 1
    }  # fmt: skip
    mf.enqueue("k", {})
    mf.worker().run(burst=True)
    after = jobs(slow)
    assert (slow.reads, slow.recounts) == (2, 1)  # live states read again, history not
    assert after["Succeeded"] == 1  # as of its last recount, up to an hour old

    eager = DatabaseGauges(mf.store, mf.clock, min_interval=0, history_interval=0, max_duty=None)
    eager.recounted.init()
    assert jobs(eager)["Succeeded"] == 2  # the first recount is inline
    assert eager.recounted.wait() == {("Succeeded", "default"): 2, ("Dropped", "default"): 1}
    mf.enqueue("k", {})
    mf.worker().run(burst=True)
    jobs(eager)  # starts a recount in a thread and serves the last counts meanwhile
    assert eager.recounted.wait() == {("Succeeded", "default"): 3, ("Dropped", "default"): 1}
    assert jobs(eager)["Succeeded"] == 3
    eager.recounted.wait()  # the recount that last scrape started ends before the store closes


def test_no_metrics_installed_counts_nothing(mf: MailFathom) -> None:
    assert metrics.current() is None

    @mf.job("k")
    def k(ctx: JobContext) -> None:
        pass

    mf.enqueue("k", {})
    assert mf.worker().run(burst=True) == 1  # the hook found nothing to count, and no error


def test_console_serves_metrics_behind_its_token_and_healthz_without(mf: MailFathom) -> None:
    mf.enqueue("k", {})
    token = secrets.token_urlsafe(32)
    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", token))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        answer = client.get("/metrics", headers={"authorization": f"Bearer {token}"})
        assert answer.status_code == 200
        samples = parse(answer.text)
        assert value(samples, "mailfathom_jobs", state="Pending", queue="default") == 1
        health = client.get("/healthz")
        assert health.status_code == 200
        assert health.json() == {
            "status": "ok",
            "checks": {"database": True, "migrations": True, "kinds": True},
        }


def test_console_metrics_over_real_http(mf: MailFathom, installed: metrics.Metrics) -> None:
    """The console's /metrics through uvicorn on a real socket (no token on loopback),
    with the process's counters when metrics are installed."""
    import socket
    import threading

    import uvicorn

    @mf.job("k")
    def k(ctx: JobContext) -> None:
        pass

    mf.enqueue("k", {})
    mf.worker().run(burst=True)
    app = create_app(Console(mf))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.should_exit = True
        thread.join(10)
    assert (
        value(
            samples, "mailfathom_job_attempts_total", kind="k", queue="default", outcome="Succeeded"
        )
        == 1
    )


def test_metrics_server_answers_404_elsewhere_and_503_when_unhealthy(
    mf: MailFathom, clock: FakeClock
) -> None:
    made = metrics.Metrics()
    server = MetricsServer(
        made.registry, lambda: check_store(mf.store, clock, worker_id="nobody")
    ).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=10)
        missing.value.close()
        assert missing.value.code == 404
        with pytest.raises(urllib.error.HTTPError) as failing:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=10)
        assert failing.value.code == 503
        report = json.loads(failing.value.read())
        failing.value.close()
        assert report["status"] == "failing"
        assert report["checks"]["heartbeat"]["ok"] is False
    finally:
        server.stop()


class _Broken(metrics.Metrics):
    def attempt_ended(self, *args: object, **fields: object) -> None:
        raise RuntimeError("a broken metrics backend")


def test_a_failing_metrics_backend_never_hurts_the_worker(
    mf: MailFathom, caplog: pytest.LogCaptureFixture
) -> None:
    @mf.job("k")
    def k(ctx: JobContext) -> None:
        pass

    job = mf.enqueue("k", {})
    metrics.install(_Broken())
    try:
        with caplog.at_level(logging.DEBUG, logger="mailfathom"):
            assert mf.worker().run(burst=True) == 1
    finally:
        metrics.uninstall()
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "observing an attempt's end failed" in caplog.text


def test_label_values_stay_bounded_whatever_kinds_and_queues_jobs_invent(
    mf: MailFathom,
) -> None:
    """Jobs in invented queues add no series past the caps: the queues past the first
    ``MAX_QUEUES`` count as ``(other)``. Invented kinds add none either: a worker never
    claims a kind it has no handler for (their jobs wait), and its own kinds are named."""

    @mf.job("known")
    def known(ctx: JobContext) -> None:
        pass

    queues = metrics.MAX_QUEUES + 20
    mf.enqueue_many("known", [{} for _ in range(5)])
    for number in range(queues):
        mf.enqueue("known", {}, queue=f"invented-{number}")
    with MailFathom(mf.settings.database_url, clock=mf.clock) as producer:
        invented = [producer.enqueue(f"invented.{n}", {}).id for n in range(5)]
    worker = mf.worker()
    server = serve_worker_metrics(mf, worker, host="127.0.0.1", port=0)
    try:
        assert worker.run(burst=True) == 5 + queues
        samples = scrape(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.stop()
        metrics.uninstall()

    attempts: dict[tuple[str, str, str], float] = {}
    for (name, frozen), count in samples.items():
        if name == "mailfathom_job_attempts_total":
            labels = dict(frozen)
            attempts[labels["kind"], labels["queue"], labels["outcome"]] = count
    assert {kind for kind, _, _ in attempts} == {"known"}
    assert {mf.jobs.get(job_id).attempts for job_id in invented} == {0}
    labelled = {queue for _, queue, _ in attempts}
    assert len(labelled) == metrics.MAX_QUEUES + 1 and metrics.OTHER in labelled
    assert sum(attempts.values()) == 5 + queues  # every attempt counted, under some label
    assert sum(n for (kind, _, _), n in attempts.items() if kind == "known") == 5 + queues
    series = {
        frozenset(labels)
        for name, labels in samples
        if name == "mailfathom_job_attempt_duration_seconds_count"
    }
    assert len(series) == metrics.MAX_QUEUES + 1


def test_attempts_of_kinds_not_registered_here_are_counted_as_other() -> None:
    """A worker claims only its kinds, but a claim without the worker's filter (an older
    worker's, or ``testing.claim``) can still bring another kind to the recorder: such
    attempts are counted under ``(other)``, never as a series of their own."""
    counted = metrics.Metrics(kinds=["known"])
    at = datetime(2030, 1, 1, tzinfo=UTC)
    for kind in ["known", *(f"invented.{n}" for n in range(5))]:
        counted.attempt_ended(kind, "default", "Succeeded", 0.01, at, at)
    kinds = {
        sample.labels["kind"]
        for family in counted.registry.collect()
        for sample in family.samples
        if sample.name == "mailfathom_job_attempts_total"
    }
    assert kinds == {"known", metrics.OTHER}

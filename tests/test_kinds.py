"""Job kinds an app has no handler for: one rule refuses them at every enqueue (Python,
``mailfathom enqueue --app``, the JSON API), a worker claims only the kinds it handles
(the rest wait Pending, no attempt spent, for a worker that knows them), and health,
the console and a gauge name the due jobs no live worker handles. Both stores."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from consolekit import make_client
from mailfathom import FakeClock, InvalidInput, JobContext, JobState, MailFathom
from mailfathom.cli import cli
from mailfathom.console import Console
from mailfathom.observability.gauges import UNHANDLED_KINDS, DatabaseGauges
from mailfathom.observability.health import check_store
from mailfathom.store.base import WorkerRegistration


@pytest.fixture
def consumer(database_url: str, clock: FakeClock) -> Iterator[MailFathom]:
    """An app that runs ``shop.ship`` (and so, strict by default, enqueues only it)."""
    app = MailFathom(database_url, clock=clock)
    app.migrate()

    @app.job("shop.ship")
    def ship(ctx: JobContext, **payload: Any) -> None:
        return None

    yield app
    app.close()


def _count(mf: MailFathom) -> int:
    return sum(mf.jobs.counts().values())


# -- the enqueue rule ----------------------------------------------------------------


def test_an_app_with_handlers_refuses_a_kind_it_does_not_register(consumer: MailFathom) -> None:
    for enqueue in (
        lambda: consumer.enqueue("shop.shp", {"order": 1}),
        lambda: consumer.enqueue_many("shop.shp", [{"order": 1}, {"order": 2}]),
    ):
        with pytest.raises(InvalidInput) as refused:
            enqueue()
        message = str(refused.value)
        assert message.startswith("job kind 'shop.shp' is not registered: registered kinds: ")
        assert "shop.ship" in message and "mailfathom.deliver" not in message
        assert "strict_kinds = false" in message and "nothing was enqueued" in message
    assert _count(consumer) == 0
    assert consumer.enqueue("shop.ship", {"order": 1}).created
    assert consumer.outbox  # its own kinds (mailfathom.deliver too) stay allowed


def test_a_producer_app_or_strict_kinds_off_enqueues_any_kind(
    database_url: str, clock: FakeClock
) -> None:
    with MailFathom(database_url, clock=clock) as producer:  # no kind of its own
        producer.migrate()
        assert producer.enqueue("billing.invoice", {"n": 1}).created
    with MailFathom(database_url, clock=clock, strict_kinds=False) as lenient:
        lenient.job("shop.ship")(lambda ctx: None)
        assert lenient.enqueue("billing.invoice", {"n": 2}).created
        assert _count(lenient) == 2


def test_the_api_and_console_follow_the_same_rule(consumer: MailFathom, database_url: str) -> None:
    client = make_client(consumer)
    refused = client.post("/api/jobs", json={"kind": "shop.shp", "hold": False})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith(
        "job kind 'shop.shp' is not registered: registered kinds: shop.ship."
    )
    assert client.post("/api/jobs", json={"kind": "shop.ship"}).status_code == 201
    with pytest.raises(InvalidInput, match="is not registered"):
        Console(consumer).create_job("shop.shp", {})
    assert _count(consumer) == 1
    with MailFathom(database_url) as producer:  # a console started without --app
        made = make_client(producer).post("/api/jobs", json={"kind": "billing.invoice"})
        assert made.status_code == 201, made.text


def test_mailfathom_enqueue_with_app_refuses_an_unregistered_kind(
    consumer: MailFathom, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "shopapp.py").write_text(
        "from mailfathom import MailFathom\n"
        "mf = MailFathom()\n"  # the database from MAILFATHOM_DATABASE_URL
        "@mf.job('shop.ship')\n"
        "def ship(ctx, order):\n"
        "    pass\n"
    )
    env = {**os.environ, "MAILFATHOM_DATABASE_URL": database_url}

    def mailfathom(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mailfathom.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    typo = mailfathom("enqueue", "shop.shp", "--app", "shopapp:mf", "--payload", '{"order": 1}')
    assert typo.returncode == 2, typo.stderr
    assert "job kind 'shop.shp' is not registered: registered kinds: shop.ship." in typo.stderr
    assert "Traceback" not in typo.stderr
    assert _count(consumer) == 0
    good = mailfathom("enqueue", "shop.ship", "--app", "shopapp:mf", "--payload", '{"order": 1}')
    assert good.returncode == 0, good.stderr
    producer = mailfathom("enqueue", "billing.invoice")  # no --app: a producer
    assert producer.returncode == 0, producer.stderr
    assert _count(consumer) == 2
    lenient = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "enqueue", "shop.shp", "--app", "shopapp:mf"],
        cwd=tmp_path,
        env={**env, "MAILFATHOM_STRICT_KINDS": "false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert lenient.returncode == 0, lenient.stderr


def test_a_schedule_obeys_the_same_rule_before_anything_is_written(consumer: MailFathom) -> None:
    consumer.schedule("nightly", cron="0 3 * * *", kind="shop.ship", payload={"order": 1})
    consumer.schedule("typo", cron="0 4 * * *", kind="shop.shp", payload={"order": 2})
    with pytest.raises(InvalidInput, match=r"^schedule 'typo': job kind 'shop.shp' is not reg"):
        consumer.schedules.sync()
    with pytest.raises(InvalidInput, match="schedule 'typo'"):
        consumer.worker().run(burst=True)
    assert consumer.schedules.list() == [] and consumer.workers.list() == []


def test_enqueue_help_states_the_rule() -> None:
    shown = CliRunner().invoke(cli, ["enqueue", "--help"], terminal_width=200).output
    assert "registers job kinds accepts only those" in " ".join(shown.split())


# -- the claim filter ----------------------------------------------------------------

CONFIGS: dict[str, dict[str, Any]] = {
    "every queue": {},
    "named queues": {"queues": ["default", "later"]},
    "queue slots": {"queues": {"default": 2, "later": 1}},
    "flow limits": {"limit": True},
}


@pytest.mark.parametrize("config", list(CONFIGS), ids=str)
def test_a_worker_claims_only_the_kinds_it_handles(
    database_url: str, clock: FakeClock, config: str
) -> None:
    """Jobs of a kind the old worker lacks, ahead of its own in claim order, wait Pending
    with no attempt while it runs its own; a worker that knows the kind then runs them."""
    settings = dict(CONFIGS[config])
    limited = settings.pop("limit", False)
    ran: list[str] = []
    with (
        MailFathom(database_url, clock=clock) as old,
        MailFathom(database_url, clock=clock) as new,
    ):
        old.migrate()
        old.job("shop.ship")(lambda ctx, n: ran.append(f"old:{n}"))
        new.job("shop.ship")(lambda ctx, n: ran.append(f"new:{n}"))
        new.job("shop.refund")(lambda ctx, n: ran.append(f"refund:{n}"))
        if limited:
            old.limit_kind("shop.ship", max_running=50)
        unknown = new.enqueue_many("shop.refund", [{"n": n} for n in range(4)], priority=10)
        known = old.enqueue_many("shop.ship", [{"n": n} for n in range(7)])
        concurrency = None if isinstance(settings.get("queues"), dict) else 2
        assert old.worker(concurrency, **settings).run(burst=True) == len(known)
        assert sorted(ran) == sorted(f"old:{n}" for n in range(7))
        for job in unknown:
            waiting = old.jobs.get(job.id)
            assert waiting.state is JobState.PENDING
            assert waiting.attempts == 0 and waiting.claimed_by is None
            assert old.jobs.attempts(job.id) == []
        assert new.worker(concurrency=2).run(burst=True) == len(unknown)
        assert sorted(r for r in ran if r.startswith("refund")) == [f"refund:{n}" for n in range(4)]
        assert {new.jobs.get(job.id).state for job in unknown} == {JobState.SUCCEEDED}


# -- what is reported ----------------------------------------------------------------


def _register(mf: MailFathom, worker_id: str, kinds: tuple[str, ...]) -> None:
    """A live worker's registration (and heartbeat), as a running worker writes it."""
    registration = WorkerRegistration(
        worker_id, "host-a", 4242, None, kinds, 4, 30.0, mf.clock.now()
    )
    mf.store.workers.heartbeat(registration, now=mf.clock.now())


def _unhandled_gauge(mf: MailFathom) -> dict[str, float]:
    gauges = DatabaseGauges(mf.store, mf.clock, min_interval=0, max_duty=None)
    (family,) = [m for m in gauges.collect() if m.name == "mailfathom_jobs_unhandled"]
    return {s.labels["kind"]: s.value for s in family.samples}


@pytest.fixture
def live(database_url: str) -> Iterator[MailFathom]:
    """An app whose fake clock starts at the real time (``mailfathom health`` reads the
    system clock)."""
    app = MailFathom(database_url, clock=FakeClock(datetime.now(UTC)))
    app.migrate()
    yield app
    app.close()


def test_due_jobs_no_live_worker_handles_are_reported(live: MailFathom) -> None:
    mf, clock = live, live.clock
    assert isinstance(clock, FakeClock)
    mf.enqueue_many("billing.invoice", [{}, {}, {}])
    mf.enqueue("billing.later", {}, delay=3600)  # not due yet
    mf.enqueue("billing.held", {}, hold=True)  # held: waits for an operator anyway
    mf.enqueue("shop.ship", {})
    console = Console(mf)
    # no live worker: nothing runs at all, which mailfathom_workers_alive says
    assert mf.store.console.unhandled_kinds(clock.now()) == {}
    assert _unhandled_gauge(mf) == {}
    _register(mf, "w-old", ("shop.ship",))
    _register(mf, "w-new", ("shop.ship", "billing.refund"))
    assert mf.store.console.unhandled_kinds(clock.now()) == {"billing.invoice": 3}
    checks = {c.name: c for c in check_store(mf.store, clock).checks}
    assert checks["kinds"].ok  # a rolling deploy passes through this: reported, not failed
    assert checks["kinds"].detail.startswith(
        "3 due job(s) of kind 'billing.invoice' that no live worker handles"
    )
    shown = CliRunner().invoke(cli, ["--database", mf.settings.database_url, "health"])
    assert shown.exit_code == 0
    assert "ok kinds: 3 due job(s) of kind 'billing.invoice' that no live worker" in shown.output
    assert console.overview().unhandled_kinds == {"billing.invoice": 3}
    client = make_client(mf)
    assert client.get("/api/overview").json()["unhandled_kinds"] == {"billing.invoice": 3}
    page = client.get("/").text
    assert "Due jobs no live worker handles" in page and "billing.invoice" in page
    assert _unhandled_gauge(mf) == {"billing.invoice": 3.0}
    clock.advance(timedelta(hours=2))  # billing.later is due now; both workers are silent
    assert mf.store.console.unhandled_kinds(clock.now()) == {}
    _register(mf, "w-next", ("shop.ship",))
    assert mf.store.console.unhandled_kinds(clock.now()) == {
        "billing.invoice": 3,
        "billing.later": 1,
    }
    _register(mf, "w-all", ("billing.invoice", "billing.later"))
    assert mf.store.console.unhandled_kinds(clock.now()) == {}
    assert "Due jobs no live worker handles" not in client.get("/").text


def test_the_gauge_gives_a_label_to_the_biggest_kinds_only(mf: MailFathom) -> None:
    extra = 3
    for n in range(UNHANDLED_KINDS + extra):
        mf.enqueue_many(f"made.up.{n:02d}", [{}] * (2 if n < UNHANDLED_KINDS else 1))
    _register(mf, "w", ("shop.ship",))
    gauge = _unhandled_gauge(mf)
    assert len(gauge) == UNHANDLED_KINDS + 1
    assert gauge["(other)"] == extra
    assert gauge["made.up.00"] == 2

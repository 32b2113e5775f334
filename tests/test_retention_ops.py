"""Retention in operation: emails, the worker's own pruning, one pruner at a time, the
``mailfathom prune`` command, the console, and SQLite giving space back."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from consolekit import make_client
from mailfathom import (
    FakeClock,
    IllegalTransition,
    JobContext,
    MailFathom,
    OutgoingEmailStage,
)
from mailfathom.cli import cli
from mailfathom.jobs.pruner import PruneReport
from mailfathom.store.retention.repository import Batch
from raw_database import raw_reading
from smtp_fixtures import FaultServer

DAY = 86400.0


def _app(mf: MailFathom, clock: FakeClock, **settings: Any) -> MailFathom:
    return MailFathom(settings=dataclasses.replace(mf.settings, **settings), clock=clock)


def _message(to: str, subject: str = "Invoice 42") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content("Please find the invoice attached.\n" * 50)
    return msg


def _ok_jobs(mf: MailFathom, n: int, pad: int = 200, **enqueue: Any) -> list[int]:
    if "t.ok" not in mf.registry.names():

        @mf.job("t.ok")
        def ok(ctx: JobContext, **payload: Any) -> None:
            pass

    jobs = mf.enqueue_many("t.ok", [{"n": i, "pad": "p" * pad} for i in range(n)], **enqueue)
    mf.worker().run(burst=True)
    return [job.id for job in jobs]


def test_a_compacted_email_keeps_envelope_replies_and_failure(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    smtp.script(rcpt={"x@example.com": "550 5.1.1 no such user"})
    sent = mail_app.outbox.record(
        _message("bob@example.com, x@example.com"), idempotency_key="invoice:42"
    )
    mail_app.worker(concurrency=1).run(burst=True)
    smtp.script(mail="550 5.7.1 relay misconfigured")
    refused = mail_app.outbox.record(_message("carol@example.com"), idempotency_key="r")
    mail_app.worker(concurrency=1).run(burst=True)
    before_sent, before_refused = mail_app.outbox.get(sent.id), mail_app.outbox.get(refused.id)
    assert before_sent.stage is OutgoingEmailStage.SENT
    assert before_refused.stage is OutgoingEmailStage.REFUSED
    assert len(mail_app.outbox.message_bytes(sent.id)) == before_sent.size > 1000

    clock.advance(29 * DAY)
    assert mail_app.prune().rows["emails"]["Sent"]["compacted"] == 0
    clock.advance(2 * DAY)
    report = mail_app.prune()
    assert report.rows["emails"]["Sent"]["compacted"] == 1
    assert report.rows["emails"]["Refused"]["compacted"] == 1
    for before in (before_sent, before_refused):
        after = mail_app.outbox.get(before.id)
        assert after.compacted and after.compacted_at == clock.now()
        assert (after.size, after.subject) == (0, None)
        changed = {"size", "subject", "compacted_at"}
        for name in (f.name for f in dataclasses.fields(after)):
            if name not in changed:
                assert getattr(after, name) == getattr(before, name), name
        with pytest.raises(IllegalTransition, match="compacted by retention"):
            mail_app.outbox.message_bytes(before.id)
    bob, x = mail_app.outbox.get(sent.id).recipients
    assert (bob.reply_code, x.reply_code, x.reply_text) == (250, 550, "5.1.1 no such user")
    with pytest.raises(IllegalTransition, match="its bytes are gone"):
        mail_app.outbox.record_again(refused.id, actor="ops")
    again = mail_app.outbox.record(_message("bob@example.com"), idempotency_key="invoice:42")
    assert not again.created and again.id == sent.id and again.compacted
    (listed,) = mail_app.outbox.list(OutgoingEmailStage.SENT)
    assert listed.compacted

    client = make_client(mail_app)
    page = client.get(f"/outbox/{sent.id}").text
    assert "compacted" in page and "Removed by retention" in page
    assert before_sent.message_id.strip("<>") in page
    assert "record-again" not in client.get(f"/outbox/{refused.id}").text
    assert "compacted" in client.get("/outbox").text
    api = client.get(f"/api/outbox/{sent.id}").json()
    assert api["email"]["compacted_at"] == clock.now().isoformat()


def test_an_email_another_record_was_split_from_is_kept_for_its_link(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    """With deletion on, a keyless final record that another record points at (recorded
    again from it) is compacted, never deleted: its link holds, and pass after pass
    completes (a delete would fail on the foreign key and wedge every pass)."""
    smtp.script(mail="550 5.7.1 relay misconfigured")
    refused = mail_app.outbox.record(_message("carol@example.com"))  # keyless
    plain = mail_app.outbox.record(_message("dave@example.com"))  # keyless, no link
    mail_app.worker(concurrency=1).run(burst=True)
    assert mail_app.outbox.get(refused.id).stage is OutgoingEmailStage.REFUSED
    again = mail_app.outbox.record_again(refused.id, actor="ops", reason="relay fixed")
    assert again.parent_id == refused.id  # Recorded; its delivery waits
    clock.advance(31 * DAY)
    with _app(mail_app, clock, retention_delete_keyless=True) as other:
        dry = other.prune(dry_run=True)
        report = other.prune()
        assert report.ran and not (other.retention.state().last_report or {}).get("failed")
        assert dry.rows["emails"]["Refused"] == report.rows["emails"]["Refused"]
        assert report.rows["emails"]["Refused"] == {"deleted": 1, "compacted": 1}
        clock.advance(DAY)
        later = other.prune()
        assert later.rows["emails"]["Refused"] == {"deleted": 0, "compacted": 0}
    kept = mail_app.outbox.get(refused.id)
    assert kept.compacted and kept.stage is OutgoingEmailStage.REFUSED
    assert mail_app.outbox.get(again.id).parent_id == refused.id
    assert [e.id for e in mail_app.outbox.list(OutgoingEmailStage.REFUSED)] == [refused.id]
    assert plain.id not in {e.id for e in mail_app.outbox.list()}


def test_the_console_shows_compacted_jobs_and_the_last_pass(
    mf: MailFathom, clock: FakeClock
) -> None:
    (job_id,) = _ok_jobs(mf, 1, idempotency_keys=["report:7"])
    client = make_client(mf)
    assert "Pruning has not run yet" in client.get("/").text
    clock.advance(8 * DAY)
    mf.prune()
    page = client.get(f"/jobs/{job_id}").text
    assert "compacted" in page and "Removed by retention" in page and "report:7" in page
    assert "compacted" in client.get("/jobs?state=Succeeded").text
    overview = client.get("/").text
    assert "Pruning last ran" in overview and "1 jobs Succeeded compacted" in overview
    assert "<td>jobs</td><td>Succeeded</td><td>1</td><td>1</td>" in overview
    api = client.get(f"/api/jobs/{job_id}").json()
    assert api["job"]["compacted_at"] == clock.now().isoformat()
    assert api["job"]["payload"] == {}


def test_a_worker_prunes_on_its_own(mf: MailFathom, clock: FakeClock) -> None:
    with _app(mf, clock, prune_interval=60) as app:
        ids = _ok_jobs(app, 3)
        worker = app.worker(queues=["elsewhere"])  # prunes; leaves the jobs to the test
        assert worker.pruner is not None
        worker.pruner.tick = 0.02
        worker.pruner.started.init()
        worker.pruner.passes.init()
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            first = worker.pruner.started.wait()
            assert first == clock.now() + timedelta(seconds=60)  # not at once
            clock.advance(8 * DAY)
            report = worker.pruner.passes.wait()
            assert isinstance(report, PruneReport) and report.ran
            assert report.rows["jobs"]["Succeeded"]["compacted"] == 3
            assert all(app.jobs.get(i).compacted for i in ids)
            # the next pass waits for the interval on the injected clock
            (more,) = _ok_jobs(app, 1)
            clock.advance(8 * DAY)
            report = worker.pruner.passes.wait()
            assert isinstance(report, PruneReport)
            assert report.rows["jobs"]["Succeeded"]["compacted"] == 1
            assert app.jobs.get(more).compacted
        finally:
            worker.stop()
            thread.join(10)
        assert not thread.is_alive()
    with _app(mf, clock, prune_interval=0) as app:
        assert app.worker().pruner is None


def test_two_pruners_at_once_never_both_run(mf: MailFathom, clock: FakeClock) -> None:
    _ok_jobs(mf, 40)
    clock.advance(8 * DAY)
    apps = [_app(mf, clock, prune_batch=1) for _ in range(2)]
    start = threading.Barrier(2)
    spans: list[tuple[float, float, PruneReport]] = []

    def prune(app: MailFathom) -> None:
        start.wait()
        began = time.monotonic()
        report = app.prune()
        spans.append((began, time.monotonic(), report))

    try:
        threads = [threading.Thread(target=prune, args=(app,)) for app in apps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        for app in apps:
            app.close()
    ran = [span for span in spans if span[2].ran]
    assert sum(report.total for _, _, report in spans) == 40  # each row exactly once
    if len(ran) == 2:  # both ran: one after the other, never side by side
        (a_start, a_end, _), (b_start, b_end, _) = sorted(ran, key=lambda s: s[0])
        assert a_end <= b_start or b_end <= a_start
    assert mf.retention.state().holder is None


def test_postgres_batches_wait_for_the_pruner_advisory_lock(
    postgres_schema_url: str, clock: FakeClock
) -> None:
    with MailFathom(postgres_schema_url, clock=clock) as mf:
        mf.migrate()
        _ok_jobs(mf, 2)
        clock.advance(8 * DAY)
        batch = Batch("jobs", "compact", "Succeeded", clock.now() - timedelta(days=7))
        with psycopg.connect(postgres_schema_url) as other, other.transaction():
            other.execute(
                "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.mf_pruner'))"
            )
            assert mf.retention.run(batch, limit=10, now=clock.now()) is None
            assert mf.prune().total == 0
        assert mf.retention.run(batch, limit=10, now=clock.now()) == 2


def test_the_prune_command(database_url: str) -> None:
    long_ago = FakeClock(datetime(2020, 1, 1, tzinfo=UTC))
    with MailFathom(database_url, clock=long_ago) as mf:
        mf.migrate()
        ids = _ok_jobs(mf, 3)
    runner = CliRunner()
    dry = runner.invoke(cli, ["--database", database_url, "prune", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["rows"]["jobs"]["Succeeded"] == {"compacted": 3}
    with MailFathom(database_url) as mf:
        assert not any(mf.jobs.get(i).compacted for i in ids)
    done = runner.invoke(cli, ["--database", database_url, "prune"])
    assert done.exit_code == 0, done.output
    assert "pruned 3 row(s)" in done.output
    with MailFathom(database_url) as mf:
        assert all(mf.jobs.get(i).compacted for i in ids)
    again = runner.invoke(cli, ["--database", database_url, "prune"])
    assert "pruned 0 row(s)" in again.output


def test_sqlite_gives_freed_pages_back(tmp_path: Any, clock: FakeClock) -> None:
    path = tmp_path / "space.db"
    with MailFathom(f"sqlite:///{path}", clock=clock) as mf:
        mf.migrate()
        with raw_reading(mf) as cur:
            assert cur.execute("PRAGMA auto_vacuum").fetchall()[0][0] == 2  # incremental
        _ok_jobs(mf, 250, pad=12000)  # 3 overflow pages a payload
        full = path.stat().st_size
        clock.advance(8 * DAY)
        report = mf.prune()
        assert report.pages_reclaimed > 0
        assert path.stat().st_size < full * 0.6


def test_an_existing_sqlite_file_converts_with_prune_vacuum(tmp_path: Any) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a file that had a table before migrate ran
        conn.execute("CREATE TABLE app_data (x INTEGER)")
    url = f"sqlite:///{path}"
    with MailFathom(url) as mf:
        mf.migrate()
        with raw_reading(mf) as cur:
            assert cur.execute("PRAGMA auto_vacuum").fetchall()[0][0] == 0  # left as it was
    done = CliRunner().invoke(cli, ["--database", url, "prune", "--vacuum", "--quiet"])
    assert done.exit_code == 0, done.output
    with MailFathom(url) as mf, raw_reading(mf) as cur:
        assert cur.execute("PRAGMA auto_vacuum").fetchall()[0][0] == 2

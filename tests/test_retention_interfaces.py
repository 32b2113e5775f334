"""Every retention rule through the CLI (settings from the environment, as an operator
sets them) and the JSON API's view of retention, on both stores. The rows finish in 2020
on a fake clock; the CLI and the console read the real clock, so they are all old."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner, Result

from consolekit import make_client
from mailfathom import (
    FakeClock,
    IllegalTransition,
    JobContext,
    MailFathom,
    NotFound,
    PermanentFailure,
)
from mailfathom.cli import cli
from test_retention import invoice_email

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def _finished_long_ago(url: str) -> dict[str, int]:
    """Succeeded jobs with and without a key, one of a kind of its own, a dead letter
    and an audit event, all finished in 2020; their ids by name."""
    with MailFathom(url, clock=FakeClock(LONG_AGO)) as mf:
        mf.migrate()

        @mf.job("t.ok")
        def ok(ctx: JobContext) -> None:
            pass

        @mf.job("t.keep")
        def keep(ctx: JobContext) -> None:
            pass

        @mf.job("t.bad", max_attempts=1)
        def bad(ctx: JobContext) -> None:
            raise PermanentFailure("broken")

        ids = {
            "keyed": mf.enqueue("t.ok", {}, idempotency_key="k:1").id,
            "keyless": mf.enqueue("t.ok", {}).id,
            "kept_kind": mf.enqueue("t.keep", {}, idempotency_key="k:2").id,
            "dead": mf.enqueue("t.bad", {}).id,
            "held": mf.enqueue("t.ok", {}, hold=True, idempotency_key="k:3").id,
        }
        mf.worker().run(burst=True)
        # an audit event whose reason runs over two lines
        mf.jobs.release(ids["held"], actor="ops", reason="go\nthe migration is done")
        mf.worker().run(burst=True)
        return ids


def _prune(url: str, env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", url, "prune", "--json", *args], env=env)


def test_every_rule_through_the_cli(database_url: str) -> None:
    ids = _finished_long_ago(database_url)
    env = {
        "MAILFATHOM_RETENTION_KINDS": json.dumps({"t.keep": {"Succeeded": "never"}}),
        "MAILFATHOM_RETENTION_DELETE_KEYLESS": "true",
        "MAILFATHOM_AUDIT_RETENTION": "30d",
    }
    dry = _prune(database_url, env, "--dry-run")
    assert dry.exit_code == 0, dry.output
    rows = json.loads(dry.output)["rows"]
    assert rows["jobs"]["Succeeded"] == {"deleted": 1, "compacted": 2}
    assert rows["job_events"]["all"] == {"compacted": 1}
    done = _prune(database_url, env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["rows"] == rows
    with MailFathom(database_url) as mf:
        assert mf.jobs.get(ids["keyed"]).compacted  # keyed: compacted, never deleted
        with pytest.raises(NotFound):
            mf.jobs.get(ids["keyless"])
        assert not mf.jobs.get(ids["kept_kind"]).compacted  # its kind says never
        assert not mf.jobs.get(ids["dead"]).compacted  # DeadLettered: never by default
        # past its period, the kept row's audit event keeps one line of its reason
        ((actor, action, reason),) = [
            (e.actor, e.action, e.reason) for e in mf.jobs.events(ids["held"])
        ]
        assert (actor, action, reason) == ("ops", "release", "go")
    # a state's own period from the environment: DeadLettered after a day
    dead = _prune(database_url, {"MAILFATHOM_RETENTION": json.dumps({"DeadLettered": "1d"})})
    assert json.loads(dead.output)["rows"]["jobs"]["DeadLettered"] == {"compacted": 1}


def test_a_bad_rule_is_refused_and_nothing_is_pruned(database_url: str) -> None:
    ids = _finished_long_ago(database_url)
    bad = _prune(database_url, {"MAILFATHOM_RETENTION": json.dumps({"Succeeded": "soon"})})
    assert bad.exit_code != 0
    assert "retention['Succeeded'] = 'soon' is not a retention period" in bad.output
    unknown = _prune(database_url, {"MAILFATHOM_RETENTION": json.dumps({"Pending": "1d"})})
    assert unknown.exit_code != 0 and "only Succeeded, DeadLettered, Dropped" in unknown.output
    with MailFathom(database_url) as mf:
        assert not any(mf.jobs.get(i).compacted for i in ids.values())


def test_the_api_shows_retention_and_compacted_rows(database_url: str) -> None:
    ids = _finished_long_ago(database_url)
    with MailFathom(database_url, clock=FakeClock(LONG_AGO)) as old:
        email = old.outbox.record(invoice_email(), run_at=LONG_AGO.replace(year=2021))
        old.outbox.cancel(email.id, actor="ops")
    with MailFathom(database_url) as mf:
        client = make_client(mf)
        before = client.get("/api/overview").json()["retention"]
        assert before["last_finished_at"] is None and before["last_pass"] is None
        assert before["rows"]["jobs"]["Succeeded"] == {"rows": 4, "compacted": 0}
        assert before["last_rows"] == {} and before["pruning_now"] is None
        report = mf.prune()
        after: dict[str, Any] = client.get("/api/overview").json()["retention"]
        assert after["last_finished_at"] == report.finished_at.isoformat()
        assert after["last_started_at"] == report.started_at.isoformat()
        assert after["pruning_now"] is None
        assert after["last_rows"] == report.rows
        assert "4 jobs Succeeded compacted" in after["last_pass"]
        assert after["rows"]["jobs"]["Succeeded"] == {"rows": 4, "compacted": 4}
        assert after["rows"]["jobs"]["DeadLettered"] == {"rows": 1, "compacted": 0}
        assert after["rows"]["emails"]["Cancelled"] == {"rows": 1, "compacted": 1}
        job = client.get(f"/api/jobs/{ids['keyed']}").json()
        assert job["job"]["compacted_at"] is not None and job["job"]["payload"] == {}
        kept = client.get(f"/api/jobs/{ids['dead']}").json()
        assert kept["job"]["compacted_at"] is None
        mail = client.get(f"/api/outbox/{email.id}").json()
        assert mail["email"]["compacted_at"] is not None


def test_the_email_rules_through_the_cli(database_url: str) -> None:
    with MailFathom(database_url, clock=FakeClock(LONG_AGO)) as old:
        old.migrate()
        cancelled = old.outbox.record(invoice_email(), run_at=LONG_AGO.replace(year=2021))
        old.outbox.cancel(cancelled.id, actor="ops")
        waiting = old.outbox.record(invoice_email(), run_at=LONG_AGO.replace(year=2021))
    kept = _prune(database_url, {"MAILFATHOM_EMAIL_RETENTION": json.dumps({"Cancelled": "never"})})
    assert kept.exit_code == 0, kept.output
    assert "Cancelled" not in json.loads(kept.output)["rows"].get("emails", {})
    bad = _prune(database_url, {"MAILFATHOM_EMAIL_RETENTION": json.dumps({"Recorded": "1d"})})
    assert bad.exit_code != 0 and "email_retention" in bad.output
    with MailFathom(database_url) as mf:
        assert mf.outbox.get(cancelled.id).compacted_at is None  # "never", then refused
    done = _prune(database_url, {"MAILFATHOM_EMAIL_RETENTION": json.dumps({"Cancelled": "1d"})})
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["rows"]["emails"]["Cancelled"] == {"compacted": 1}
    with MailFathom(database_url) as mf:
        assert mf.outbox.get(cancelled.id).compacted_at is not None
        assert mf.outbox.get(waiting.id).compacted_at is None  # not finished: never pruned
        with pytest.raises(IllegalTransition, match="compacted"):
            mf.outbox.message_bytes(cancelled.id)
        assert mf.outbox.message_bytes(waiting.id)

"""examples/flask_app.py over HTTP with Flask's test client, and ``flask mailfathom worker``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from examples.flask_app import Account, create
from flask import Flask
from sqlalchemy.orm import Session

from mailfathom import JobContext, JobState, MailFathom
from mailfathom.contrib.flask import MailFathomFlask
from mailfathom.contrib.flask import cli as flask_cli
from smtp_fixtures import FaultServer


@pytest.fixture
def site(database_url: str, smtp: FaultServer) -> Iterator[Flask]:
    app = create(database_url, smtp.url())
    yield app
    app.extensions["mailfathom"].mf.close()
    app.extensions["engine"].dispose()


def _mf(app: Flask) -> MailFathom:
    ext: MailFathomFlask = app.extensions["mailfathom"]
    return ext.mf


def test_a_signup_commits_its_email_and_job_and_the_worker_runs_both(
    site: Flask, smtp: FaultServer
) -> None:
    answer = site.test_client().post("/signup", json={"id": 1, "email": "ada@example.org"})
    assert answer.status_code == 201
    job_id = answer.get_json()["job"]
    result = site.test_cli_runner().invoke(args=["mailfathom", "worker", "--burst"])
    assert result.exit_code == 0, result.output
    mf = _mf(site)
    assert mf.jobs.get(job_id).state is JobState.SUCCEEDED
    assert [r.rcpt_tos for r in smtp.accepted()] == [["ada@example.org"]]
    with Session(site.extensions["engine"]) as db:
        account = db.get(Account, 1)
        assert account is not None
        assert account.followed_up_by == "Example Site", "the job ran in the app's context"


def test_a_failed_signup_leaves_no_account_email_or_job(site: Flask) -> None:
    client = site.test_client()
    answer = client.post("/signup", json={"id": 1, "email": "ada@example.org", "fail": True})
    assert answer.status_code == 500
    mf = _mf(site)
    assert sum(mf.jobs.counts().values()) == 0
    assert mf.outbox.list() == []
    with Session(site.extensions["engine"]) as db:
        assert db.get(Account, 1) is None


def test_kinds_registered_on_mf_run_in_the_app_context_too(site: Flask) -> None:
    mf = _mf(site)
    seen: list[str] = []

    @mf.job("plain.kind")
    def plain(ctx: JobContext) -> None:
        from flask import current_app

        seen.append(current_app.name)

    @mf.job("plain.async")
    async def plain_async(ctx: JobContext) -> None:
        from flask import current_app

        seen.append(current_app.name)

    mf.enqueue("plain.kind")
    mf.enqueue("plain.async")
    assert site.extensions["mailfathom"].worker().run(burst=True) == 2
    assert seen == [site.name, site.name]


def test_the_factory_pattern_and_a_missing_extension(tmp_path: object) -> None:
    ext = MailFathomFlask()
    with pytest.raises(Exception, match="init_app"):
        _ = ext.mf
    bare = Flask("bare")
    bare.cli.add_command(flask_cli)
    result = bare.test_cli_runner().invoke(args=["mailfathom", "migrate"])
    assert result.exit_code != 0
    assert "no MailFathomFlask extension" in result.output
    app = Flask("factory")
    app.config["MAILFATHOM_DATABASE_URL"] = f"sqlite:///{tmp_path}/factory.db"
    ext.init_app(app)
    result = app.test_cli_runner().invoke(args=["mailfathom", "migrate"])
    assert result.exit_code == 0 and "migration(s)" in result.output
    ext.mf.close()

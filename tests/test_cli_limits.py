"""``mailfathom limits [NAME]`` against real databases: each limit's values and use, its
keys (blocked first, capped by --keys), the jobs waiting on it; JSON as the API gives it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result

from mailfathom import MailFathom
from mailfathom.cli import cli
from mailfathom.testing import claim


@pytest.fixture
def app(database_url: str) -> Iterator[MailFathom]:
    """A migrated app on the real clock (the CLI reads the real clock too)."""
    mf = MailFathom(database_url)
    mf.migrate()
    yield mf
    mf.close()


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", url, *args])


def test_no_limit_says_so(app: MailFathom, database_url: str) -> None:
    answer = run(database_url, "limits")
    assert answer.exit_code == 0, answer.output
    assert "no limit is stored" in answer.output
    assert json.loads(run(database_url, "limits", "--json").output) == []


def test_limits_with_their_keys_and_waiting_jobs(app: MailFathom, database_url: str) -> None:
    @app.job("sync", max_running=4, limit_key=lambda p: p["account"], max_running_per_key=1)
    def sync(ctx: object, account: str) -> None: ...

    app.limit_queue("mail", rate="100/min")
    app.limits.sync()
    jobs = app.enqueue_many("sync", [{"account": a} for a in ["acme", "acme", "globex", "zeta"]])
    assert len(claim(app, "w1", 10, timedelta(seconds=60))) == 3

    answer = run(database_url, "limits")
    assert answer.exit_code == 0, answer.output
    lines = [" ".join(line.replace("│", " ").split()) for line in answer.output.splitlines()]
    assert "kind:sync" in lines and "queue:mail" in lines
    assert "whole kind 4 — 3 0 room" in lines  # no rate: no window to count
    assert "each key 1 —" in lines
    assert "key acme 1 — 1 0 blocked" in lines
    assert "whole queue — 100/min 0 0 room" in lines
    assert f"waiting on it (1): {jobs[1].id}" in lines

    capped = run(database_url, "limits", "kind:sync", "--keys", "1").output
    assert "3 keys (3 blocked); the 1 shown are blocked first" in " ".join(capped.split())
    one = json.loads(run(database_url, "limits", "kind:sync", "--json").output)
    assert one["name"] == "kind:sync" and one["waiting"] == [jobs[1].id]
    assert [row["key"] for row in one["keys"]] == ["acme", "globex", "zeta"]


def test_bad_input_is_refused(app: MailFathom, database_url: str) -> None:
    unknown = run(database_url, "limits", "kind:nothing")
    assert unknown.exit_code == 2
    assert "no limit named 'kind:nothing' is stored" in unknown.output
    bad = run(database_url, "limits", "--keys", "0")
    assert bad.exit_code == 2 and "--keys" in bad.output

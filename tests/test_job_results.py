"""Task results: what a handler returns is stored on its Succeeded job, on both stores.

Real workers run real handlers (plain, ``async def`` and in child processes); the
results are read back through ``mf.jobs.get`` / ``list`` and, for the exact text,
straight from the row.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from click.testing import CliRunner

import worker_app
from consolekit import make_client
from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    JobContext,
    JobState,
    MailFathom,
    ResultError,
)
from mailfathom.cli import cli
from mailfathom.store.sql_store import SqlStore
from mailfathom.web.openapi import document
from raw_database import raw_reading, raw_transaction

DAY = 86400.0

#: Values that read back only if stored as the exact text written: a negative zero, a
#: float that looks like an integer, key order, text beyond ASCII, a big integer.
EXACT: dict[str, Any] = {
    "z": -0.0,
    "big": 1e16,
    "a": [1, 2.5, None, True, 'é\n"\\'],
    "n": 10**30,
    "nested": {"b": {}, "a": []},
}


def conforms(body: Any, schema: str) -> None:
    """``body`` matches the named schema of the API's own OpenAPI document."""
    doc = document()
    jsonschema_rs.validate(
        {"$ref": f"#/components/schemas/{schema}", "components": doc["components"]}, body
    )


def _stored_text(mf: MailFathom, job_id: int) -> str | None:
    with raw_reading(mf) as cur:
        cur.execute(
            "SELECT result::text AS result FROM mf_jobs WHERE id = %(id)s"
            if mf.store.dialect == "postgresql"
            else "SELECT result FROM mf_jobs WHERE id = :id",
            {"id": job_id},
        )
        row = cur.fetchone()
    assert row is not None
    text: str | None = row["result"]
    return text


def test_a_returned_value_is_stored_exactly_on_the_succeeded_job(mf: MailFathom) -> None:
    @mf.job("report")
    def build(ctx: JobContext, n: int) -> dict[str, Any]:
        return {**EXACT, "n_rows": n}

    job = mf.enqueue("report", {"n": 3})
    assert mf.jobs.get(job.id).result is None  # not run yet
    assert mf.worker().run(burst=True) == 1
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {**EXACT, "n_rows": 3}
    assert list(done.result) == [*EXACT, "n_rows"]  # key order kept
    assert str(done.result["z"]) == "-0.0" and type(done.result["big"]) is float
    (listed,) = mf.jobs.list(state=JobState.SUCCEEDED)
    assert listed.result == done.result
    assert _stored_text(mf, job.id) == (
        '{"z":-0.0,"big":1e+16,"a":[1,2.5,null,true,"é\\n\\"\\\\"],'
        '"n":1000000000000000000000000000000,"nested":{"b":{},"a":[]},"n_rows":3}'
    )


@pytest.mark.parametrize("value", ["text", 0, 2.5, False, True, [], {}, [1, {"a": None}]])
def test_any_json_value_is_a_result(mf: MailFathom, value: Any) -> None:
    @mf.job("k")
    def handler(ctx: JobContext) -> Any:
        return value

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == value and type(done.result) is type(value)


def test_returning_none_stores_nothing(mf: MailFathom) -> None:
    @mf.job("k")
    def handler(ctx: JobContext) -> None:
        return None

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    assert mf.jobs.get(job.id).result is None
    assert _stored_text(mf, job.id) is None  # NULL, not the JSON text 'null'


def test_each_job_of_a_batch_gets_its_own_result(mf: MailFathom) -> None:
    """Outcomes are recorded in batches (one statement for all the successes): each row
    must get its own job's result, the ones that returned None none."""

    @mf.job("echo")
    def echo(ctx: JobContext, i: int) -> dict[str, int] | None:
        return None if i % 3 == 0 else {"i": i, "id": ctx.job_id}

    jobs = mf.enqueue_many("echo", [{"i": i} for i in range(40)])
    assert mf.worker(concurrency=8).run(burst=True) == 40
    for i, job in enumerate(jobs):
        done = mf.jobs.get(job.id)
        assert done.state is JobState.SUCCEEDED
        assert done.result == (None if i % 3 == 0 else {"i": i, "id": job.id})


def test_an_async_handler_result_is_stored(mf: MailFathom) -> None:
    @mf.job("a")
    async def handler(ctx: JobContext, x: int) -> list[int]:
        return [x, x * 2]

    @mf.job("a.timed", timeout=30)
    async def timed(ctx: JobContext, x: int) -> str:
        return f"x={x}"

    first, second = mf.enqueue("a", {"x": 4}), mf.enqueue("a.timed", {"x": 5})
    mf.worker().run(burst=True)
    assert mf.jobs.get(first.id).result == [4, 8]
    assert mf.jobs.get(second.id).result == "x=5"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (datetime(2026, 1, 2, tzinfo=UTC), "returned a datetime"),
        ({1, 2}, "returned a set"),
        ((1, 2), "a tuple would come back as a list"),
        ({"when": object()}, "result['when'] is a object"),
        ({1: "a"}, "keys must be strings"),
        (float("nan"), "nan is not JSON"),
    ],
)
def test_a_result_that_is_not_json_fails_the_attempt_permanently(
    mf: MailFathom, value: Any, named: str
) -> None:
    @mf.job("k", max_attempts=5)
    def handler(ctx: JobContext) -> Any:
        return value

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED and dead.attempts == 1
    assert dead.failure_class is FailureClass.PERMANENT and dead.result is None
    assert dead.failure_reason is not None
    assert "the handler of 'k' returned a" in dead.failure_reason
    assert named in dead.failure_reason
    assert "cannot be stored as the job's result" in dead.failure_reason
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.FAILED
    assert attempt.error_type == "mailfathom.jobs.failures.ResultError"


def test_a_result_over_the_payload_limit_fails_the_attempt(
    database_url: str, clock: FakeClock
) -> None:
    with MailFathom(database_url, clock=clock, max_payload_bytes=100) as mf:
        mf.migrate()

        @mf.job("k")
        def handler(ctx: JobContext, n: int) -> str:
            return "x" * n

        small, large = mf.enqueue("k", {"n": 98}), mf.enqueue("k", {"n": 99})
        mf.worker().run(burst=True)
        assert mf.jobs.get(small.id).result == "x" * 98  # 100 bytes as JSON
        dead = mf.jobs.get(large.id)
        assert dead.state is JobState.DEAD_LETTERED and dead.result is None
        assert dead.failure_reason is not None
        assert "result is 101 bytes as JSON, over the 100-byte limit" in dead.failure_reason


def test_result_error_is_public_and_permanent() -> None:
    from mailfathom import PermanentFailure

    assert issubclass(ResultError, PermanentFailure)


def test_retention_compacts_the_result_with_the_payload(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("k")
    def handler(ctx: JobContext, blob: str) -> dict[str, str]:
        return {"echo": blob}

    job = mf.enqueue("k", {"blob": "b" * 500})
    mf.worker().run(burst=True)
    assert mf.jobs.get(job.id).result == {"echo": "b" * 500}
    clock.advance(6 * DAY)
    mf.prune()
    assert mf.jobs.get(job.id).result == {"echo": "b" * 500}  # within its period
    clock.advance(2 * DAY)
    assert mf.prune().rows["jobs"]["Succeeded"]["compacted"] == 1
    compacted = mf.jobs.get(job.id)
    assert compacted.compacted and compacted.payload == {} and compacted.result is None
    assert _stored_text(mf, job.id) is None


def test_a_result_set_to_never_expire_stays(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("kept", retention="never")
    def handler(ctx: JobContext) -> int:
        return 42

    job = mf.enqueue("kept")
    mf.worker().run(burst=True)
    clock.advance(400 * DAY)
    mf.prune()
    assert mf.jobs.get(job.id).result == 42


@pytest.mark.slow
def test_results_come_back_from_child_processes(mf: MailFathom) -> None:
    mf.job("report", isolation="process")(worker_app.report)
    mf.job("report.async", isolation="process")(worker_app.report_async)
    mf.job("report.set", isolation="process")(worker_app.report_a_set)
    plain = mf.enqueue("report", {"rows": 7})
    awaited = mf.enqueue("report.async", {"rows": 1})
    refused = mf.enqueue("report.set")
    assert mf.worker(concurrency=3).run(burst=True) == 3
    result = mf.jobs.get(plain.id).result
    assert result["rows"] == 7 and str(result["ratio"]) == "-0.0"
    assert mf.jobs.get(awaited.id).result == [1, 2]
    dead = mf.jobs.get(refused.id)
    assert dead.state is JobState.DEAD_LETTERED and dead.failure_class is FailureClass.PERMANENT
    assert dead.failure_reason is not None and "returned a set" in dead.failure_reason


def test_a_success_whose_lease_was_lost_writes_no_result(mf: MailFathom, clock: FakeClock) -> None:
    """The result goes with the success: a worker whose lease moved on writes neither."""
    mf.job("k")(lambda ctx: None)
    job = mf.enqueue("k")
    (claimed,) = mf.store.claims.claim(
        owner="w1", limit=1, now=clock.now(), lease_until=clock.now()
    )
    lost = mf.store.claims.record_outcomes(
        owner="w2", now=clock.now(), succeeded=[(job.id, 1)], results={job.id: '"late"'}
    )
    assert lost == {job.id}
    assert mf.jobs.get(job.id).state is JobState.CLAIMED
    assert _stored_text(mf, job.id) is None
    assert claimed["result"] is None


def test_enqueued_jobs_have_no_result(mf: MailFathom) -> None:
    job = mf.enqueue("anything")
    assert job.result is None and dataclasses.replace(job).result is None
    assert mf.jobs.get(job.id).result is None


def _run_one(mf: MailFathom, value: Any) -> int:
    """A Succeeded job whose handler returned ``value``."""
    mf.job("returns")(lambda ctx: value)
    job = mf.enqueue("returns")
    mf.worker().run(burst=True)
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    return job.id


def test_the_api_shows_the_result_as_documented(mf: MailFathom) -> None:
    value = {"z": "last", "a": [1, 2.5, None], "html": "<b>&</b>"}
    job_id = _run_one(mf, value)
    client = make_client(mf)
    detail = client.get(f"/api/jobs/{job_id}").json()
    conforms(detail, "JobDetail")
    assert detail["job"]["result"] == value
    assert list(detail["job"]["result"]) == ["z", "a", "html"]
    listed = client.get("/api/jobs", params={"state": "Succeeded"}).json()
    conforms(listed, "JobPage")
    assert listed["jobs"][0]["result"] == value
    pending = mf.enqueue("returns")
    shown = client.get(f"/api/jobs/{pending.id}").json()
    conforms(shown, "JobDetail")
    assert shown["job"]["result"] is None


def test_the_console_job_page_shows_the_result_escaped(mf: MailFathom, clock: FakeClock) -> None:
    job_id = _run_one(mf, {"note": "<script>alert(1)</script>", "n": 2})
    client = make_client(mf)
    html = client.get(f"/jobs/{job_id}").text
    assert "<h2>Result</h2>" in html
    assert "<script>alert" not in html
    assert "&#34;note&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html
    clock.advance(8 * DAY)
    mf.prune()
    compacted = client.get(f"/jobs/{job_id}").text
    assert "<h2>Result</h2>" in compacted and "alert(1)" not in compacted
    assert "the payload, the result and the attempts' tracebacks are gone" in compacted


def test_the_console_says_when_a_handler_returned_nothing(mf: MailFathom) -> None:
    job_id = _run_one(mf, None)
    html = make_client(mf).get(f"/jobs/{job_id}").text
    assert "None: the handler returned nothing." in html
    pending = mf.enqueue("returns")
    assert "<h2>Result</h2>" not in make_client(mf).get(f"/jobs/{pending.id}").text


def test_sqlite_completes_a_batch_through_the_primary_key(tmp_path: Path) -> None:
    """Writing the results joins the batch to the table: the batch must be the outer loop
    and each row found by its id, never every Claimed row walked with the batch inside."""
    with MailFathom(f"sqlite:///{tmp_path / 'plan.db'}") as app:
        app.migrate()
        store = app.store
        assert isinstance(store, SqlStore)
        query = store.claims._q["complete_jobs"]
        conn = sqlite3.connect(tmp_path / "plan.db")
        plan = [
            row[3]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN {query}",
                {"now": "2030", "owner": "w", "held": "[[1,1,null]]"},
            )
        ]
        conn.close()
    assert plan[0].startswith("SCAN held"), plan
    assert "SEARCH mf_jobs USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan


def test_the_database_keeps_results_to_succeeded_whole_rows(
    mf: MailFathom, clock: FakeClock
) -> None:
    """The schema refuses a result on a job that has not succeeded, on a compacted row,
    and the JSON null (None is stored as NULL)."""
    job_id = _run_one(mf, None)
    pending = mf.enqueue("returns")
    pg = mf.store.dialect == "postgresql"
    write = (
        "UPDATE mf_jobs SET result = %(result)s::json WHERE id = %(id)s"
        if pg
        else "UPDATE mf_jobs SET result = :result WHERE id = :id"
    )
    with raw_transaction(mf) as cur:  # a Succeeded, whole row takes one
        cur.execute(write, {"result": '{"a":1}', "id": job_id})
    for result, target in [("null", job_id), ('"x"', pending.id)]:
        with pytest.raises(Exception, match=r"(?i)check"), raw_transaction(mf) as cur:
            cur.execute(write, {"result": result, "id": target})
    with raw_transaction(mf) as cur:
        cur.execute(write, {"result": None, "id": job_id})
    clock.advance(8 * DAY)
    mf.prune()
    with pytest.raises(Exception, match=r"(?i)check"), raw_transaction(mf) as cur:
        cur.execute(write, {"result": '{"a":1}', "id": job_id})


def test_jobs_show_prints_the_result(mf: MailFathom, database_url: str) -> None:
    job_id = _run_one(mf, {"path": "thumbs/7.png", "n": 2})
    shown = CliRunner().invoke(cli, ["--database", database_url, "jobs", "show", str(job_id)])
    assert shown.exit_code == 0, shown.output
    result = shown.output[shown.output.index("result\n") :]
    assert result.startswith('result\n{\n  "path": "thumbs/7.png",\n  "n": 2\n}\nattempts')
    as_json = CliRunner().invoke(
        cli, ["--database", database_url, "jobs", "show", str(job_id), "--json"]
    )
    assert json.loads(as_json.output)["job"]["result"] == {"path": "thumbs/7.png", "n": 2}

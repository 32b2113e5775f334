"""Hostile input to the console: a clear 400 and nothing written, never a 500 after a commit.

The real app (Starlette's TestClient over ``create_app``) on each store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, csrf_of, make_client, register_demo_kinds
from mailfathom import MailFathom
from mailfathom.cli import cli
from mailfathom.console import Console
from mailfathom.console.serialize import TOO_DEEP
from mailfathom.web import create_app
from raw_database import raw_transaction

BIG = "9" * 5000  # more digits than Python converts (4300)
DEEP = "[" * 100_000  # more nesting than json.loads can follow


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    return make_client(mf)


def _nothing_written(mf: MailFathom) -> None:
    assert sum(mf.jobs.counts().values()) == 0


def _post_json(client: Any, path: str, text: str) -> Any:
    return client.post(path, content=text, headers={"content-type": "application/json"})


def test_the_api_refuses_unreadable_bodies_with_400(client: Any, mf: MailFathom) -> None:
    for body in (
        '{"kind": "demo.ok", "priority": ' + BIG + "}",
        '{"kind": "demo.ok", "payload": {"n": ' + BIG + "}}",
        '{"kind": "demo.ok", "payload": {"a": ' + DEEP + "}}",
        DEEP,
        '{"kind": "demo.ok", "payload": {"a": "\\udc80"}}',
        '{"kind": "demo.ok", "payload": {"a": ' + "[" * 65 + "]" * 65 + "}}",
    ):
        answer = _post_json(client, "/api/jobs", body)
        assert answer.status_code == 400, (body[:60], answer.text)
        assert answer.json()["error"]["type"] in ("InvalidInput", "PayloadError")
    _nothing_written(mf)


def test_the_new_job_form_refuses_unreadable_input_with_400(client: Any, mf: MailFathom) -> None:
    form = client.get("/jobs/new").text
    for fields in (
        {"priority": BIG},
        {"priority": "-" + BIG},
        {"payload": '{"n": ' + BIG + "}"},
        {"payload": '{"a": ' + DEEP + "}"},
        {"payload": '{"a": ' + "[" * 900 + "]" * 900 + "}"},
        {"payload": '{"a": "\\udc80"}'},
    ):
        data = {"csrf_token": csrf_of(form), "kind": "demo.ok", "payload": "{}", **fields}
        answer = client.post("/jobs/new", data=data)
        assert answer.status_code == 400, (str(fields)[:60], answer.text[:200])
        assert "New job" in answer.text
    _nothing_written(mf)


def test_paging_ids_outside_64_bits_are_400_on_every_store(client: Any) -> None:
    for path in ("/outbox", "/jobs", "/audit", "/api/outbox", "/api/jobs", "/api/audit"):
        for before in ("9223372036854775808", BIG):
            answer = client.get(path, params={"before": before})
            assert answer.status_code == 400, (path, before[:30], answer.text[:200])
    for path in ("/outbox/unknown", "/api/outbox/unknown"):
        assert client.get(path, params={"after": "9223372036854775808"}).status_code == 400
    for path in ("/jobs/", "/outbox/", "/api/jobs/", "/api/outbox/"):
        assert client.get(path + BIG).status_code == 404  # no such id, and no int() of it
        assert client.get(path + "9223372036854775808").status_code == 400


def _store_payload_as_old_rows_may(mf: MailFathom, job_id: int, text: str) -> None:
    """Write a payload past today's limit, as a row from before the limit could be."""
    cast = "::json" if mf.store.dialect == "postgresql" else ""
    param = "%s" if mf.store.dialect == "postgresql" else "?"
    with raw_transaction(mf) as cur:
        sql = f"UPDATE mf_jobs SET payload = {param}{cast} WHERE id = {param}"
        cur.execute(sql, (text, job_id))


def test_a_stored_payload_deeper_than_the_limit_still_lists_and_shows(
    client: Any, mf: MailFathom, database_url: str
) -> None:
    job = mf.enqueue("demo.ok", {}, hold=True)
    _store_payload_as_old_rows_may(mf, job.id, '{"a": ' + "[" * 500 + "]" * 500 + "}")
    listed = client.get("/api/jobs")
    assert listed.status_code == 200 and TOO_DEEP in listed.text
    assert client.get(f"/api/jobs/{job.id}").status_code == 200
    page = client.get(f"/jobs/{job.id}")
    assert page.status_code == 200 and TOO_DEEP in page.text
    runner = CliRunner()
    for args in (["jobs", "list", "--json"], ["jobs", "show", str(job.id), "--json"]):
        result = runner.invoke(cli, ["--database", database_url, *args])
        assert result.exit_code == 0, result.output[-500:]
        assert TOO_DEEP in result.output
        json.loads(result.output)
    shown = runner.invoke(cli, ["--database", database_url, "jobs", "show", str(job.id)])
    assert shown.exit_code == 0 and TOO_DEEP in shown.output


def _boom(request: Request) -> Response:
    raise RuntimeError("a bug")


def test_a_500_carries_the_security_headers(mf: MailFathom) -> None:
    routes: list[BaseRoute] = [Route("/boom", _boom), Route("/api/boom", _boom)]
    app = create_app(Console(mf), extra_routes=routes)
    client = TestClient(
        app,
        base_url="http://127.0.0.1:8025",
        raise_server_exceptions=False,
        client=LOOPBACK_PEER,
    )
    for path in ("/boom", "/api/boom"):
        answer = client.get(path)
        assert answer.status_code == 500
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "a bug" not in answer.text and "log has the traceback" in answer.text
    assert client.get("/api/boom").json()["error"]["type"] == "InternalError"

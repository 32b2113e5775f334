"""The JSON API: every endpoint, its errors, and its access rules."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import Route

from consolekit import TOKEN, dead_letters, make_client, register_demo_kinds
from mailfathom import JobState, MailFathom
from mailfathom.web.openapi import document

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    return make_client(mf)


def test_overview(client: Any, mf: MailFathom) -> None:
    dead_letters(mf, 2)
    mf.enqueue("demo.ok", {}, hold=True)
    body = client.get("/api/overview").json()
    assert body["job_counts"] == {
        "Pending": 1,
        "Claimed": 0,
        "Succeeded": 0,
        "DeadLettered": 2,
        "Dropped": 0,
    }
    assert body["held"] == 1
    assert len(body["throughput"]) == 60
    assert body["throughput"][-1]["dead_lettered"] == 2
    assert [a["key"] for a in body["attention"]] == ["dead_lettered", "held"]


def test_list_jobs_filters_and_pages(client: Any, mf: MailFathom) -> None:
    dead = dead_letters(mf, 3)
    mf.enqueue_many("demo.ok", [{"i": i} for i in range(2)])
    first = client.get("/api/jobs", params={"limit": 2}).json()
    assert len(first["jobs"]) == 2 and first["next_before"] == first["jobs"][-1]["id"]
    rest = client.get("/api/jobs", params={"limit": 5, "before": first["next_before"]}).json()
    assert len(rest["jobs"]) == 3 and rest["next_before"] is None
    dead_only = client.get("/api/jobs", params={"state": "DeadLettered", "kind": "demo.flaky"})
    assert sorted(j["id"] for j in dead_only.json()["jobs"]) == sorted(dead)
    assert client.get("/api/jobs", params={"text": "mailbox"}).json()["jobs"][0]["id"] in dead
    for params, message in [
        ({"state": "Asleep"}, "unknown job state"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 500"),
        ({"limit": "x"}, "limit must be"),
        ({"before": "-3"}, "before must be"),
        ({"older_than": "soon"}, "not a duration"),
        ({"kind": "no spaces"}, "job kind"),
    ]:
        answer = client.get("/api/jobs", params=params)
        assert answer.status_code == 400, params
        assert answer.json()["error"]["type"] == "InvalidInput"
        assert message in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "name", "value"),
    [
        ("/api/jobs", "limit", "\u00b2"),
        ("/api/jobs", "before", "\u00b2"),
        ("/api/outbox", "before", "\u00b2"),
        ("/api/audit", "limit", "\u0663"),  # ARABIC-INDIC DIGIT THREE
        ("/api/throughput", "minutes", "\u00b9"),
    ],
)
def test_unicode_digits_are_bad_input(client: Any, path: str, name: str, value: str) -> None:
    answer = client.get(path, params={name: value})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["type"] == "InvalidInput"
    assert f"{name} must be a whole number" in answer.json()["error"]["message"]


def test_counts_kinds_and_throughput(client: Any, mf: MailFathom) -> None:
    mf.enqueue("demo.ok", {}, hold=True)
    assert client.get("/api/jobs/counts").json() == {
        "Pending": 1,
        "Claimed": 0,
        "Succeeded": 0,
        "DeadLettered": 0,
        "Dropped": 0,
        "Held": 1,
    }
    assert client.get("/api/kinds").json() == {"kinds": ["demo.flaky", "demo.ok", "demo.sometimes"]}
    assert len(client.get("/api/throughput", params={"minutes": 5}).json()["minutes"]) == 5
    assert client.get("/api/throughput", params={"minutes": 5000}).status_code == 400


def test_get_job_with_attempts_and_events(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    client.post(f"/api/jobs/{job_id}/requeue", json={"reason": "fixed", "actor": "bob"})
    body = client.get(f"/api/jobs/{job_id}").json()
    assert body["job"]["state"] == "Pending"
    (attempt,) = body["attempts"]
    assert attempt["outcome"] == "Failed" and "PermanentFailure" in attempt["traceback"]
    (event,) = body["events"]
    assert (event["action"], event["actor"], event["reason"]) == ("requeue", "api:bob", "fixed")
    missing = client.get("/api/jobs/999")
    assert missing.status_code == 404 and "no job has id 999" in missing.json()["error"]["message"]
    assert client.get(f"/api/jobs/{2**63}").status_code == 400
    assert client.get("/api/jobs/abc").status_code == 404


def test_actions_and_their_errors(client: Any, mf: MailFathom) -> None:
    a, b = dead_letters(mf, 2)
    held = mf.enqueue("demo.ok", {}, hold=True)
    assert client.post(f"/api/jobs/{a}/requeue", json={}).json()["state"] == "Pending"
    assert client.post(f"/api/jobs/{b}/drop", json=None, headers=JSON).json()["state"] == "Dropped"
    assert client.post(f"/api/jobs/{held.id}/release", json={}).json()["held"] is False
    bare = client.post(f"/api/jobs/{held.id}/release")  # no body and no type: a no-cors fetch
    assert bare.status_code == 415
    conflict = client.post(f"/api/jobs/{a}/drop", json={})
    assert conflict.status_code == 409
    assert conflict.json()["error"]["type"] == "IllegalTransition"
    assert client.post("/api/jobs/12345/requeue", json={}).status_code == 404
    assert client.post(f"/api/jobs/{a}/explode", json={}).status_code == 400
    assert client.post(f"/api/jobs/{a}/requeue", json={"why": "x"}).status_code == 400
    assert (
        client.post(
            f"/api/jobs/{a}/requeue", content=b"{oops", headers={"content-type": "application/json"}
        ).status_code
        == 400
    )
    assert client.post(f"/api/jobs/{a}/requeue", json=[1]).status_code == 400
    form = client.post(f"/api/jobs/{b}/requeue", data={"reason": "x"})
    assert form.status_code == 415
    assert mf.jobs.get(b).state is JobState.DROPPED


def test_bulk_by_ids_and_by_filter(client: Any, mf: MailFathom) -> None:
    dead = dead_letters(mf, 4)
    other = mf.enqueue("demo.ok", {})
    by_ids = client.post("/api/jobs/bulk/drop", json={"ids": [dead[0], other.id]}).json()
    assert by_ids["done"] == [dead[0]]
    assert by_ids["refused"][0]["id"] == other.id
    by_filter = client.post(
        "/api/jobs/bulk/requeue", json={"filter": {"kind": "demo.flaky"}, "reason": "relay back"}
    ).json()
    assert sorted(by_filter["done"]) == sorted(dead[1:]) and by_filter["refused"] == []
    for body in (
        {},
        {"ids": [1], "filter": {}},
        {"ids": "1"},
        {"ids": [0]},
        {"filter": {"state": "Pending"}},
        {"filter": {"colour": "red"}},
        {"filter": {"kind": 3}},
    ):
        assert client.post("/api/jobs/bulk/requeue", json=body).status_code == 400, body
    assert client.post("/api/jobs/bulk/launch", json={"ids": [1]}).status_code == 400


def test_create_job(client: Any, mf: MailFathom) -> None:
    made = client.post("/api/jobs", json={"kind": "demo.ok", "payload": {"n": 1}, "priority": 2})
    assert made.status_code == 201
    assert made.json()["held"] is False and made.json()["created"] is True
    assert made.json()["state"] == "Pending" and made.json()["available_at"] is not None
    held = client.post("/api/jobs", json={"kind": "demo.ok", "hold": True}).json()
    assert held["held"] is True and held["available_at"] is None
    timed = client.post("/api/jobs", json={"kind": "demo.ok", "run_at": "2030-05-01T10:00:00Z"})
    assert timed.json()["held"] is False and timed.json()["available_at"].startswith("2030-05-01")
    keyed = {"kind": "demo.ok", "idempotency_key": "k1", "hold": False}
    assert client.post("/api/jobs", json=keyed).json()["created"] is True
    assert client.post("/api/jobs", json=keyed).json()["created"] is False
    for body, message in [
        ({}, "kind is required"),
        ({"kind": "demo.nope"}, "not registered"),
        ({"kind": "demo.ok", "payload": [1]}, "payload must be a JSON object"),
        ({"kind": "demo.ok", "priority": "high"}, "priority must be an integer"),
        ({"kind": "demo.ok", "hold": "yes"}, "hold must be true or false"),
        ({"kind": "demo.ok", "run_at": "soon"}, "not a date and time"),
        ({"kind": "demo.ok", "hold": True, "run_at": "2030-01-01T00:00"}, "hold=True cannot"),
        ({"kind": "demo.ok", "queue": "a b"}, "queue 'a b' is not usable"),
        ({"kind": "demo.ok", "colour": 1}, "unknown fields ['colour']"),
    ]:
        answer = client.post("/api/jobs", json=body)
        assert answer.status_code == 400, body
        assert message in answer.json()["error"]["message"], body
    assert sum(mf.jobs.counts().values()) == 4


def test_create_job_schema_states_the_default(client: Any) -> None:
    """The schema says what an omitted ``hold`` means: not held, like ``mf.enqueue``."""
    schema = client.get("/api/openapi.json").json()
    hold = schema["components"]["schemas"]["NewJob"]["properties"]["hold"]
    assert hold["default"] is False


def test_audit(client: Any, mf: MailFathom) -> None:
    dead = dead_letters(mf, 3)
    for job_id in dead:
        client.post(f"/api/jobs/{job_id}/drop", json={})
    first = client.get("/api/audit", params={"limit": 2}).json()
    assert [e["job_id"] for e in first["events"]] == [dead[2], dead[1]]
    rest = client.get("/api/audit", params={"before": first["next_before"]}).json()
    assert [e["job_id"] for e in rest["events"]] == [dead[0]]
    assert client.get("/api/audit", params={"limit": 501}).status_code == 400


def test_unknown_api_paths_answer_json_404(client: Any) -> None:
    answer = client.get("/api/nothing/here")
    assert answer.status_code == 404 and "openapi.json" in answer.json()["error"]["message"]


def test_every_api_route_is_documented(client: Any) -> None:
    paths = document()["paths"]
    served = {
        (
            route.path.replace(":id}", "}").replace(":path", "").replace(":name}", "}"),
            method.lower(),
        )
        for route in client.app.routes
        if isinstance(route, Route) and route.path.startswith("/api/")
        for method in (route.methods or set()) - {"HEAD"}
        if route.path not in ("/api/openapi.json", "/api/{rest:path}")
    }
    documented = {(path, method) for path, ops in paths.items() for method in ops}
    assert served == documented
    assert client.get("/api/openapi.json").json()["paths"].keys() == paths.keys()


def test_a_protected_api_needs_the_bearer_token(mf: MailFathom) -> None:
    register_demo_kinds(mf)
    client = make_client(mf, token=TOKEN)
    refused = client.get("/api/jobs")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/api/openapi.json").status_code == 401
    wrong = client.get("/api/jobs", headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = client.get("/api/jobs", headers={"authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    made = client.post(
        "/api/jobs", json={"kind": "demo.ok"}, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert made.status_code == 201
    assert client.post("/api/jobs", json={"kind": "demo.ok"}).status_code == 401
    assert sum(mf.jobs.counts().values()) == 1


def test_cross_site_and_foreign_host_requests_are_refused(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    cross = client.post(
        f"/api/jobs/{job_id}/drop", json={}, headers={"origin": "http://evil.example"}
    )
    assert cross.status_code == 403
    rebound = client.get("/api/jobs", headers={"host": "evil.example:8025"})
    assert rebound.status_code == 421
    assert mf.jobs.get(job_id).state is JobState.DEAD_LETTERED
    same = client.post(
        f"/api/jobs/{job_id}/drop", json={}, headers={"origin": "http://127.0.0.1:8025"}
    )
    assert same.status_code == 200


def test_nul_characters_are_bad_input_on_every_store(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    for answer in (
        client.post("/api/jobs", json={"kind": "demo.ok", "payload": {"a": "x\u0000y"}}),
        client.post("/api/jobs", json={"kind": "demo.ok", "idempotency_key": "a\u0000"}),
        client.get("/api/jobs", params={"text": "\x00"}),
        client.post(f"/api/jobs/{job_id}/requeue", json={"reason": "\u0000"}),
        client.post("/api/jobs", json={"kind": "demo.ok", "run_at": "0001-01-01T00:00+05:00"}),
    ):
        assert answer.status_code == 400, answer.text
    assert mf.jobs.get(job_id).state is JobState.DEAD_LETTERED
    literal = client.post("/api/jobs", json={"kind": "demo.ok", "payload": {"a": "C:\\u0000"}})
    assert literal.status_code == 201 and literal.json()["payload"] == {"a": "C:\\u0000"}


def test_schedules_and_workers(client: Any, mf: MailFathom) -> None:
    from consolekit import register_worker, store_schedule

    store_schedule(mf)
    register_worker(mf, "w-1", queues=("mail",))
    nightly = "/api/schedules/reports/nightly"
    (schedule,) = client.get("/api/schedules").json()["schedules"]
    assert schedule["name"] == "reports/nightly" and schedule["next_tick"].endswith(
        "03:00:00+00:00"
    )
    paused = client.post(
        "/api/schedules/reports/nightly/pause", json={"reason": "audit", "actor": "ann"}
    )
    assert paused.status_code == 200
    assert (paused.json()["paused"], paused.json()["paused_by"], paused.json()["next_tick"]) == (
        True,
        "api:ann",
        None,
    )
    again = client.post(f"{nightly}/pause", json={})
    assert again.status_code == 409 and "already paused" in again.json()["error"]["message"]
    assert client.post(f"{nightly}/resume", json={}).json()["paused"] is False
    assert client.post(f"{nightly}/resume", json={}).status_code == 409
    assert client.post("/api/schedules/nope/pause", json={}).status_code == 404
    assert client.post("/api/schedules/bad name!/pause", json={}).status_code == 400
    assert (
        client.post("/api/schedules/reports/nightly/resume", json={"reason": "x"}).status_code
        == 400
    )
    (worker,) = client.get("/api/workers").json()["workers"]
    assert (worker["id"], worker["queues"], worker["alive"], worker["lease"]) == (
        "w-1",
        ["mail"],
        True,
        30.0,
    )
    overview = client.get("/api/overview").json()
    assert (overview["workers_alive"], overview["schedules"]) == (1, 1)

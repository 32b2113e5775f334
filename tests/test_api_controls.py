"""The JSON API's operator controls on every store: hold, run now and abort (one job and
in bulk), and pausing and resuming queues, each audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from consolekit import make_client, register_demo_kinds
from mailfathom import FakeClock, JobState, MailFathom
from mailfathom.testing import claim


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    return make_client(mf)


def test_hold_run_now_and_abort_one_job(client: Any, mf: MailFathom, clock: FakeClock) -> None:
    later = mf.enqueue("demo.ok", {}, delay=3600)
    held = client.post(f"/api/jobs/{later.id}/hold", json={"reason": "wait", "actor": "amy"})
    assert held.status_code == 200 and held.json()["held"] is True
    again = client.post(f"/api/jobs/{later.id}/hold", json={})
    assert again.status_code == 409 and "held already" in again.json()["error"]["message"]
    client.post(f"/api/jobs/{later.id}/release", json={})

    delayed = mf.enqueue("demo.ok", {}, delay=3600)
    now = client.post(f"/api/jobs/{delayed.id}/run_now", json={})
    assert now.status_code == 200
    assert mf.jobs.get(delayed.id).available_at == clock.now()
    assert client.post(f"/api/jobs/{delayed.id}/run_now", json={}).status_code == 409

    claim(mf, "w", 10, timedelta(seconds=30))
    running = mf.jobs.list(state=JobState.CLAIMED)[0]
    aborted = client.post(f"/api/jobs/{running.id}/abort", json={"reason": "stuck", "actor": "amy"})
    assert aborted.status_code == 200
    assert aborted.json()["abort_reason"] == "aborted by api:amy: stuck"
    assert aborted.json()["state"] == "Claimed"
    assert [e.action for e in mf.jobs.events(running.id)][-1] == "abort"


def test_abort_a_pending_job_then_drop_it(client: Any, mf: MailFathom) -> None:
    job = mf.enqueue("demo.ok", {})
    aborted = client.post(f"/api/jobs/{job.id}/abort", json={"reason": "typo", "actor": "amy"})
    assert aborted.status_code == 200
    body = aborted.json()
    assert body["state"] == "DeadLettered" and body["failure_class"] == "Permanent"
    assert body["failure_reason"] == "aborted by api:amy: typo (before it started)"
    assert mf.queue.claim("w", 10, timedelta(seconds=30)) == []  # it never starts
    dropped = client.post(f"/api/jobs/{job.id}/drop", json={"reason": "cleared"})
    assert dropped.status_code == 200 and dropped.json()["state"] == "Dropped"
    assert [e.action for e in mf.jobs.events(job.id)] == ["abort", "drop"]


def test_bulk_hold_and_abort_over_a_filter(client: Any, mf: MailFathom) -> None:
    jobs = [mf.enqueue("demo.ok", {"i": i}, queue="mail").id for i in range(4)]
    other = mf.enqueue("demo.ok", {}, queue="other")
    held = client.post("/api/jobs/bulk/hold", json={"filter": {"queue": "mail"}}).json()
    assert sorted(held["done"]) == sorted(jobs) and held["refused"] == []
    assert not mf.jobs.get(other.id).held
    mf.jobs.release(jobs[0], actor="ops")
    claim(mf, "w", 10, timedelta(seconds=30))
    claimed = sorted(j.id for j in mf.jobs.list(state=JobState.CLAIMED))
    assert claimed == sorted([jobs[0], other.id])
    by_filter = client.post("/api/jobs/bulk/abort", json={"filter": {}, "reason": "drain"})
    assert sorted(by_filter.json()["done"]) == claimed
    # by id, a Pending (here held) job is aborted too: dead-lettered, it never starts
    by_ids = client.post("/api/jobs/bulk/abort", json={"ids": [jobs[1], jobs[0]]}).json()
    assert by_ids["done"] == [jobs[1]] and by_ids["refused"][0]["id"] == jobs[0]  # asked already
    assert mf.jobs.get(jobs[1]).state is JobState.DEAD_LETTERED
    wrong = client.post("/api/jobs/bulk/abort", json={"filter": {"state": "Pending"}})
    assert wrong.status_code == 400


def test_pause_list_and_resume_queues(client: Any, mf: MailFathom) -> None:
    mf.enqueue("demo.ok", {}, queue="mail")
    paused = client.post("/api/queues/mail/pause", json={"reason": "relay down", "actor": "bo"})
    assert paused.status_code == 200
    assert paused.json()["queue"] == "mail" and paused.json()["actor"] == "api:bo"
    twice = client.post("/api/queues/mail/pause", json={})
    assert twice.status_code == 409
    listed = client.get("/api/queues").json()["queues"]
    (mail,) = [q for q in listed if q["queue"] == "mail"]
    assert mail["pending"] == 1 and mail["paused"]["reason"] == "relay down"
    assert client.post("/api/queues/mail/pause", json={"why": "x"}).status_code == 400
    bad = client.post("/api/queues/bad name!/pause", json={})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "InvalidInput"
    assert "queue 'bad name!' is not usable" in bad.json()["error"]["message"]
    # a line break in a name is a bad name too (400), not a route that matches nothing (404)
    for path in ("/api/queues/mail%0A/pause", "/api/queues/a%0Ab/resume"):
        broken = client.post(path, json={})
        assert broken.status_code == 400, path
        assert broken.json()["error"]["type"] == "InvalidInput"
    assert client.post("/api/schedules/s%0A/pause", json={}).status_code == 400
    assert client.get("/api/limits/kind:x%0A").json()["error"]["type"] == "NotFound"

    bulk = client.post("/api/queues/bulk/resume", json={"queues": ["mail", "other"]}).json()
    assert bulk["done"] == ["mail"]
    assert bulk["refused"][0]["queue"] == "other"
    assert "is not paused" in bulk["refused"][0]["error"]
    assert mf.queues.paused() == []
    assert client.post("/api/queues/bulk/launch", json={"queues": ["a"]}).status_code == 400
    assert client.post("/api/queues/bulk/pause", json={"queues": []}).status_code == 400
    assert [e.action for e in mf.queues.events("mail")] == ["resume", "pause"]


def test_release_and_run_now_one_job_and_in_bulk(client: Any, mf: MailFathom) -> None:
    held = mf.enqueue("demo.ok", {}, hold=True)
    released = client.post(f"/api/jobs/{held.id}/release", json={"actor": "cy"})
    assert released.status_code == 200 and released.json()["held"] is False
    assert client.post(f"/api/jobs/{held.id}/release", json={}).status_code == 409
    assert [e.actor for e in mf.jobs.events(held.id)] == ["api:cy"]

    waiting = [mf.enqueue("demo.ok", {}, hold=True, queue="mail").id for _ in range(2)]
    bulk = client.post("/api/jobs/bulk/release", json={"filter": {"queue": "mail"}}).json()
    assert sorted(bulk["done"]) == sorted(waiting) and bulk["refused"] == []
    assert not any(mf.jobs.get(i).held for i in waiting)

    later = [mf.enqueue("demo.ok", {}, delay=3600, queue="late").id for _ in range(2)]
    due = mf.enqueue("demo.ok", {}, queue="late").id
    ran = client.post("/api/jobs/bulk/run_now", json={"ids": [*later, due]}).json()
    assert sorted(ran["done"]) == sorted(later)
    assert [r["id"] for r in ran["refused"]] == [due]  # due already: left alone, listed
    assert all(mf.jobs.get(i).available_at == mf.clock.now() for i in later)

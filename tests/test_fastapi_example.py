"""examples/fastapi_app.py over HTTP: orders, jobs and email in one SQLAlchemy transaction,
the console mounted under /ops behind the app's auth, and the in-process worker."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from examples.fastapi_app import create
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mailfathom import JobContext, JobState, MailFathom
from raw_database import raw_reading

ADA = {"x-demo-user": "ada"}
GRACE = {"x-demo-user": "grace"}  # read-only


@pytest.fixture
def shop(database_url: str) -> Iterator[FastAPI]:
    app = create(database_url, run_worker=False)
    yield app
    app.state.mf.close()
    app.state.engine.dispose()


@pytest.fixture
def client(shop: FastAPI) -> Iterator[TestClient]:
    with TestClient(shop, base_url="http://shop.example.com") as client:
        yield client


def _orders(mf: MailFathom) -> int:
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM shop_orders")
        return int(cur.fetchone()["n"])


def test_an_order_commits_its_job_and_email(shop: FastAPI, client: TestClient) -> None:
    answer = client.post("/orders", json={"id": 1, "email": "ada@example.org"})
    assert answer.status_code == 201
    mf: MailFathom = shop.state.mf
    assert mf.jobs.get(answer.json()["job"]).payload == {"order_id": 1}
    assert mf.outbox.get(answer.json()["email"]).subject == "Order 1"
    assert _orders(mf) == 1


def test_a_failed_order_leaves_no_job_and_no_email(shop: FastAPI, client: TestClient) -> None:
    answer = client.post("/orders", json={"id": 1, "email": "ada@example.org", "fail": True})
    assert answer.status_code == 500
    mf: MailFathom = shop.state.mf
    assert sum(mf.jobs.counts().values()) == 0
    assert mf.outbox.list() == []
    assert _orders(mf) == 0


def test_the_console_refuses_whom_auth_refuses(client: TestClient) -> None:
    for path in ("/ops/", "/ops/jobs", "/ops/api/jobs"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"x-demo-user": "mallory"}).status_code == 401
    assert client.get("/ops/api/jobs").json()["error"]["type"] == "Unauthorized"


def test_the_console_under_its_prefix_links_under_it(client: TestClient) -> None:
    page = client.get("/ops/jobs", headers=GRACE)
    assert page.status_code == 200
    links = re.findall(r'(?:href|action|src)="([^"]+)"', page.text)
    assert links and all(link.startswith("/ops/") for link in links if link.startswith("/"))
    assert client.get("/ops/static/console.css", headers=GRACE).status_code == 200


def test_the_read_only_role_sees_but_cannot_act(shop: FastAPI, client: TestClient) -> None:
    mf: MailFathom = shop.state.mf
    job = mf.enqueue("shop.confirm", {"order_id": 7}, hold=True)
    assert client.get(f"/ops/api/jobs/{job.id}", headers=GRACE).json()["job"]["held"]
    confirm = client.get(f"/ops/jobs/{job.id}/release", headers=GRACE)
    assert confirm.status_code == 200
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', confirm.text)
    assert csrf is not None
    form = client.post(
        f"/ops/jobs/{job.id}/release", data={"csrf_token": csrf.group(1)}, headers=GRACE
    )
    api = client.post(f"/ops/api/jobs/{job.id}/release", json={}, headers=GRACE)
    create_job = client.post("/ops/api/jobs", json={"kind": "shop.confirm"}, headers=GRACE)
    assert (form.status_code, api.status_code, create_job.status_code) == (403, 403, 403)
    assert "read-only" in api.json()["error"]["message"]
    assert mf.jobs.get(job.id).available_at is None, "still held"
    assert sum(mf.jobs.counts().values()) == 1


def test_an_operator_acts_and_is_audited_by_name(shop: FastAPI, client: TestClient) -> None:
    mf: MailFathom = shop.state.mf
    job = mf.enqueue("shop.confirm", {"order_id": 7}, hold=True)
    confirm = client.get(f"/ops/jobs/{job.id}/release", headers=ADA)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', confirm.text)
    assert csrf is not None
    done = client.post(
        f"/ops/jobs/{job.id}/release",
        data={"csrf_token": csrf.group(1)},
        headers=ADA,
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"/ops/jobs/{job.id}"
    assert mf.jobs.get(job.id).available_at is not None
    assert [event.actor for event in mf.jobs.events(job.id)] == ["web:ada"]


def test_a_cross_site_form_is_refused_even_for_an_operator(
    shop: FastAPI, client: TestClient
) -> None:
    job = shop.state.mf.enqueue("shop.confirm", {"order_id": 7}, hold=True)
    answer = client.post(
        f"/ops/jobs/{job.id}/release",
        data={"csrf_token": "x"},
        headers={**ADA, "origin": "https://evil.example.net"},
    )
    assert answer.status_code == 403
    assert shop.state.mf.jobs.get(job.id).available_at is None


def test_the_lifespan_worker_runs_jobs_and_stops_with_the_app(tmp_path: object) -> None:
    app = create(f"sqlite:///{tmp_path}/shop.db")
    mf: MailFathom = app.state.mf
    ran = threading.Event()

    @mf.job("test.ping")
    def ping(ctx: JobContext) -> None:
        ran.set()

    with TestClient(app) as client:
        order = client.post("/orders", json={"id": 1, "email": "ada@example.org"}).json()
        job = mf.enqueue("test.ping")
        assert ran.wait(10), "the in-process worker did not run the job"
    # Leaving the block shut the application down: the worker stopped gracefully,
    # recording what it ran and deregistering.
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    assert mf.jobs.get(order["job"]).state is JobState.SUCCEEDED
    assert mf.workers.list() == []
    mf.close()
    app.state.engine.dispose()

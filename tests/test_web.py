"""The console's pages: what they show, the two-step actions, login, CSRF and escaping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, TOKEN, csrf_of, dead_letters, make_client, register_demo_kinds
from mailfathom import ConfigurationError, JobState, MailFathom, Settings
from mailfathom.web import Access
from mailfathom.web.server import build_console_app


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    return make_client(mf)


def test_overview_shows_counts_chart_and_what_waits(client: Any, mf: MailFathom) -> None:
    dead_letters(mf, 2)
    mf.enqueue("demo.ok", {}, hold=True)
    html = client.get("/").text
    assert "Waiting for an operator" in html
    assert re.search(r'href="/jobs\?state=DeadLettered"><strong>2</strong> dead-lettered', html)
    assert re.search(r'href="/jobs\?state=Held"><strong>1</strong> held', html)
    assert html.count("<rect") >= 60 and "2 failed attempts, 2 dead-lettered" in html
    assert 'data-refresh="5"' in html


def test_overview_when_all_is_well(client: Any) -> None:
    assert "Nothing is waiting for an operator." in client.get("/").text


def test_jobs_list_filters_and_pages(client: Any, mf: MailFathom) -> None:
    dead = dead_letters(mf, 2, to="dave@example.com")
    mf.enqueue_many("demo.ok", [{"i": i} for i in range(55)])
    html = client.get("/jobs", params={"state": "DeadLettered"}).text
    assert sorted(int(i) for i in re.findall(r'name="id" value="(\d+)"', html)) == sorted(dead)
    assert "mailbox &lt;dave@example.com&gt;" in html
    first = client.get("/jobs").text
    assert len(re.findall(r'name="id" value="', first)) == 50
    older = re.search(r'href="(/jobs\?before=\d+)" rel="next"', first)
    assert older is not None
    assert len(re.findall(r'name="id" value="', client.get(older.group(1)).text)) == 7
    bad = client.get("/jobs", params={"older_than": "ages"})
    assert bad.status_code == 400 and "not a duration" in bad.text
    for path in ("/jobs", "/outbox"):
        for before in ("\u00b2", "\u0663"):  # digits to str.isdigit(), not to int()
            bad = client.get(path, params={"before": before})
            assert bad.status_code == 400 and "before must be a positive whole number" in bad.text


def test_job_detail_shows_payload_attempts_traceback_and_escapes(
    client: Any, mf: MailFathom
) -> None:
    (job_id,) = dead_letters(mf, 1, to="<script>alert(1)</script>")
    html = client.get(f"/jobs/{job_id}").text
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Traceback (most recent call last)" in html and "PermanentFailure" in html
    assert f'href="/jobs/{job_id}/requeue"' in html and f'href="/jobs/{job_id}/drop"' in html
    assert client.get("/jobs/999").status_code == 404
    assert "no job has id 999" in client.get("/jobs/999").text


def test_requeue_is_confirmed_then_audited(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    confirm = client.get(f"/jobs/{job_id}/requeue")
    assert "Requeue job" in confirm.text and mf.jobs.get(job_id).state is JobState.DEAD_LETTERED
    done = client.post(
        f"/jobs/{job_id}/requeue",
        data={"csrf_token": csrf_of(confirm.text), "reason": "relay fixed"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == f"/jobs/{job_id}"
    after = client.get(f"/jobs/{job_id}").text
    assert f"Job {job_id} requeued." in after and "relay fixed" in after and "web:console" in after
    twice = client.post(f"/jobs/{job_id}/requeue", data={"csrf_token": csrf_of(confirm.text)})
    assert twice.status_code == 409 and "only DeadLettered jobs can be requeued" in twice.text


def test_abort_a_pending_job_then_drop_it(client: Any, mf: MailFathom) -> None:
    ready = mf.enqueue("demo.ok", {})
    held = mf.enqueue("demo.ok", {}, hold=True)
    for job in (ready, held):
        assert f'href="/jobs/{job.id}/abort"' in client.get(f"/jobs/{job.id}").text
    confirm = client.get(f"/jobs/{ready.id}/abort")
    assert "It never starts: it is dead-lettered at once" in confirm.text
    done = client.post(
        f"/jobs/{ready.id}/abort",
        data={"csrf_token": csrf_of(confirm.text), "reason": "wrong customer"},
    )
    assert f"Job {ready.id} aborted: dead-lettered, it never starts" in done.text
    dead = mf.jobs.get(ready.id)
    assert dead.state is JobState.DEAD_LETTERED and dead.failure_class is not None
    assert dead.failure_class.value == "Permanent"
    assert dead.failure_reason == "aborted by web:console: wrong customer (before it started)"
    assert f'href="/jobs/{ready.id}/abort"' not in done.text
    assert f'href="/jobs/{ready.id}/drop"' in done.text
    dropped = client.post(
        f"/jobs/{ready.id}/drop", data={"csrf_token": csrf_of(confirm.text), "reason": "gone"}
    )
    assert f"Job {ready.id} dropped." in dropped.text
    assert mf.jobs.get(ready.id).state is JobState.DROPPED
    assert [e.action for e in mf.jobs.events(ready.id)] == ["abort", "drop"]
    assert mf.jobs.get(held.id).state is JobState.PENDING  # only the chosen job


def test_every_post_route_is_csrf_checked(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    posts = [
        route
        for route in client.app.routes
        if isinstance(route, Route)
        and "POST" in (route.methods or ())
        and not route.path.startswith("/api/")
    ]
    assert len(posts) >= 12
    for route in posts:
        assert getattr(route.endpoint, "checks_csrf", False), route.path
        path = (
            route.path.replace("{job_id:id}", str(job_id))
            .replace("{action}", "drop")
            .replace("{email_id:id}", "1")
            .replace("{name:path}", "reports/nightly")
        )
        missing = client.post(path, data={"reason": "x", "action": "drop", "id": str(job_id)})
        assert missing.status_code == 403, path
        forged = client.post(
            path, data={"csrf_token": "forged", "action": "drop", "id": str(job_id)}
        )
        assert forged.status_code == 403, path
    assert mf.jobs.get(job_id).state is JobState.DEAD_LETTERED


def test_bulk_on_selected_and_on_matching(client: Any, mf: MailFathom) -> None:
    dead = dead_letters(mf, 4)
    pending = mf.enqueue("demo.ok", {})
    confirm = client.get(
        "/jobs/bulk", params=[("action", "drop"), ("id", dead[0]), ("id", pending.id)]
    )
    assert "Drop 2 jobs?" in confirm.text
    result = client.post(
        "/jobs/bulk",
        data={"csrf_token": csrf_of(confirm.text), "action": "drop", "id": [dead[0], pending.id]},
    )
    assert "1 job dropped" in result.text and "only DeadLettered jobs can be dropped" in result.text
    matching = client.get(
        "/jobs/bulk", params={"action": "requeue", "scope": "matching", "kind": "demo.flaky"}
    )
    assert "Requeue 3 jobs?" in matching.text
    assert "DeadLettered jobs of kind demo.flaky" in matching.text
    done = client.post(
        "/jobs/bulk",
        data={
            "csrf_token": csrf_of(matching.text),
            "action": "requeue",
            "scope": "matching",
            "kind": "demo.flaky",
        },
    )
    assert "3 jobs requeued" in done.text
    assert [mf.jobs.get(i).state for i in dead] == [JobState.DROPPED] + [JobState.PENDING] * 3
    empty = client.get("/jobs/bulk", params={"action": "drop"})
    assert empty.status_code == 400 and "no jobs selected" in empty.text


def test_create_a_held_job_then_run_it(client: Any, mf: MailFathom) -> None:
    form = client.get("/jobs/new").text
    assert "<option>demo.ok</option>" in form
    bad = client.post(
        "/jobs/new",
        data={
            "csrf_token": csrf_of(form),
            "kind": "demo.ok",
            "payload": '{"n": 1,}',
            "priority": "0",
        },
    )
    assert bad.status_code == 400 and "payload is not valid JSON (line 1, column 9" in bad.text
    assert "{&#34;n&#34;: 1,}" in bad.text  # the operator's input is kept, escaped
    superscript = client.post(
        "/jobs/new",
        data={
            "csrf_token": csrf_of(form),
            "kind": "demo.ok",
            "payload": "{}",
            "priority": "-\u00b2",
        },
    )
    assert superscript.status_code == 400 and "priority must be a whole number" in superscript.text
    made = client.post(
        "/jobs/new",
        data={
            "csrf_token": csrf_of(form),
            "kind": "demo.ok",
            "payload": '{"n": 1}',
            "priority": "4",
            "queue": "",
        },
        follow_redirects=False,
    )
    job_id = int(made.headers["location"].rsplit("/", 1)[1])
    job = mf.jobs.get(job_id)
    assert job.held and job.priority == 4 and job.payload == {"n": 1}
    page = client.get(f"/jobs/{job_id}").text
    assert "press Run to start it" in page and f'href="/jobs/{job_id}/release"' in page
    confirm = client.get(f"/jobs/{job_id}/release").text
    assert f"Run job {job_id}?" in confirm
    client.post(f"/jobs/{job_id}/release", data={"csrf_token": csrf_of(confirm)})
    assert mf.worker().run(burst=True) == 1
    assert mf.jobs.get(job_id).state is JobState.SUCCEEDED
    timed = client.post(
        "/jobs/new",
        data={"csrf_token": csrf_of(form), "kind": "demo.ok", "run_at": "2030-01-01T00:00:00"},
        follow_redirects=False,
    )
    assert not mf.jobs.get(int(timed.headers["location"].rsplit("/", 1)[1])).held


def test_audit_log_page(client: Any, mf: MailFathom) -> None:
    (job_id,) = dead_letters(mf, 1)
    mf.jobs.drop(job_id, actor="ops:erin", reason="<b>spam</b>")
    html = client.get("/audit").text
    assert "ops:erin" in html and "&lt;b&gt;spam&lt;/b&gt;" in html and f"/jobs/{job_id}" in html


def test_security_headers(client: Any) -> None:
    answer = client.get("/")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert "secure" not in cookie  # plain-HTTP loopback use: the browser must send it back


def test_secure_cookies_behind_tls(mf: MailFathom, tmp_path: Path) -> None:
    env = {"MAILFATHOM_WEB_SECURE_COOKIES": "true"}
    settings = Settings.load({}, environ=env, toml_path=tmp_path / "none.toml")
    app = build_console_app(
        mf, host="127.0.0.1", token=None, secure_cookies=settings.web_secure_cookies
    )
    client = TestClient(app, base_url="https://127.0.0.1:8025", client=LOOPBACK_PEER)
    cookie = client.get("/").headers["set-cookie"].lower()
    assert "; secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie


def test_login_protects_every_page(mf: MailFathom) -> None:
    register_demo_kinds(mf)
    (job_id,) = dead_letters(mf, 1)
    client = make_client(mf, token=TOKEN)
    away = client.get(f"/jobs/{job_id}", follow_redirects=False)
    assert away.status_code == 303 and away.headers["location"] == f"/login?next=%2Fjobs%2F{job_id}"
    post = client.post(f"/jobs/{job_id}/drop", data={})
    assert post.status_code == 401
    login = client.get(away.headers["location"]).text
    wrong = client.post(
        "/login", data={"csrf_token": csrf_of(login), "token": "guess", "next": f"/jobs/{job_id}"}
    )
    assert wrong.status_code == 401 and "not the console token" in wrong.text
    no_csrf = client.post("/login", data={"token": TOKEN})
    assert no_csrf.status_code == 403
    ok = client.post(
        "/login",
        data={
            "csrf_token": csrf_of(login),
            "token": TOKEN,
            "name": "zoe",
            "next": f"/jobs/{job_id}",
        },
        follow_redirects=False,
    )
    assert ok.headers["location"] == f"/jobs/{job_id}"
    page = client.get(f"/jobs/{job_id}/drop").text
    assert "web:zoe" in page
    client.post(f"/jobs/{job_id}/drop", data={"csrf_token": csrf_of(page)})
    assert mf.jobs.events(job_id)[0].actor == "web:zoe (self-declared)"
    assert "Log out" in client.get("/").text
    client.post("/logout", data={"csrf_token": csrf_of(client.get("/").text)})
    assert client.get("/", follow_redirects=False).status_code == 303


def test_login_never_redirects_off_site(mf: MailFathom) -> None:
    client = make_client(mf, token=TOKEN)
    login = client.get("/login").text
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        answer = client.post(
            "/login",
            data={"csrf_token": csrf_of(login), "token": TOKEN, "next": target},
            follow_redirects=False,
        )
        assert answer.headers["location"] == "/", target
        login = client.get("/login").text if answer.status_code == 303 else login


def test_binding_off_loopback_needs_a_strong_token() -> None:
    with pytest.raises(ConfigurationError, match="not a loopback address, without a token"):
        Access.for_bind("0.0.0.0", None)
    with pytest.raises(ConfigurationError, match="make a random one with python -c"):
        Access.for_bind("10.1.2.3", "short")
    assert Access.for_bind("::1", None).token is None
    assert Access.for_bind("192.168.1.5", TOKEN).protected
    assert Access.for_bind("127.0.0.1", TOKEN).protected  # a token is required when given


def test_schedules_pause_and_resume_with_confirmation(client: Any, mf: MailFathom) -> None:
    from consolekit import store_schedule

    store_schedule(mf)
    listing = client.get("/schedules").text
    assert "reports/nightly" in listing and "<code>0 3 * * *</code>" in listing
    assert 'href="/schedules/pause?name=reports%2Fnightly"' in listing
    confirm = client.get("/schedules/reports/nightly/pause").text
    assert "Pause schedule reports/nightly?" in confirm
    assert not mf.schedules.get("reports/nightly").paused
    done = client.post(
        "/schedules/reports/nightly/pause",
        data={"csrf_token": csrf_of(confirm), "reason": "<i>quiet</i> week"},
    )
    assert "Schedule reports/nightly paused" in done.text
    assert "&lt;i&gt;quiet&lt;/i&gt; week" in done.text and "web:console" in done.text
    assert mf.schedules.get("reports/nightly").paused
    resume = client.get("/schedules/reports/nightly/resume").text
    assert "runs again from its next tick" in resume
    client.post("/schedules/reports/nightly/resume", data={"csrf_token": csrf_of(resume)})
    assert not mf.schedules.get("reports/nightly").paused
    assert client.get("/schedules/missing/pause").status_code == 404


def test_workers_page_and_overview(client: Any, mf: MailFathom, clock: Any) -> None:
    from datetime import timedelta

    from consolekit import register_worker

    assert "No worker is alive" in client.get("/").text
    register_worker(mf, "w-gone")
    clock.advance(timedelta(minutes=5))
    register_worker(mf, "w-here", queues=("mail", "default"))
    html = client.get("/workers").text
    assert "w-here" in html and "mail, default" in html and "silent past its lease" in html
    overview = client.get("/").text
    assert re.search(r'href="/workers"><strong>1</strong> workers silent', overview)
    assert "No worker is alive" not in overview

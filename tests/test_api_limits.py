"""``GET /api/limits`` and ``/api/limits/{name}`` on every store, over real HTTP (a uvicorn
server on a loopback port, behind the console token): each flow-control limit's values,
its use now, its keys (blocked first, then the busiest, capped) and the jobs it holds back."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import uvicorn

from consolekit import TOKEN
from mailfathom import JobState, MailFathom
from mailfathom.clock import FakeClock
from mailfathom.console import Console
from mailfathom.testing import claim
from mailfathom.web import Access, create_app
from mailfathom.web.limits import server_config

LEASE = timedelta(seconds=30)


@dataclass
class Answer:
    """One HTTP answer: its status and its JSON body."""

    status_code: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Api:
    """GET requests to a served console, with its token unless other headers are given."""

    url: str

    def get(
        self, path: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        sent = {"authorization": f"Bearer {TOKEN}"} if headers is None else headers
        request = urllib.request.Request(self.url + path + query, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return Answer(answer.status, answer.read())
        except urllib.error.HTTPError as refused:
            with refused:
                return Answer(refused.code, refused.read())


@pytest.fixture
def api(mf: MailFathom) -> Iterator[Api]:
    """An HTTP client for the console on ``mf``, served by uvicorn with a token."""
    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", TOKEN))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    yield Api(f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(10)


def claimed(mf: MailFathom, limit: int = 100) -> list[int]:
    """Claim up to ``limit`` jobs as worker w1; their ids."""
    return sorted(job.id for job in claim(mf, "w1", limit, LEASE))


def test_no_limit_stored_lists_none(api: Api, mf: MailFathom) -> None:
    mf.enqueue("free", {})
    assert api.get("/api/limits").json() == {"limits": []}


def test_each_limit_with_its_values_use_keys_and_waiting_jobs(api: Api, mf: MailFathom) -> None:
    @mf.job(
        "sync.account",
        max_running=3,
        rate="100/min",
        limit_key=lambda payload: payload["account"],
        max_running_per_key=1,
        key_limits={"vip": {"max_running": 2, "rate": "5/10s"}},
    )
    def sync(ctx: object, account: str) -> None: ...

    mf.job("send")(lambda ctx: None)  # another kind in the limited queue
    mf.limit_queue("mail", max_running=5)
    mf.limits.sync()
    ids = mf.enqueue_many("sync.account", [{"account": a} for a in ["a", "a", "b", "vip"]])
    mail = mf.enqueue("send", {}, queue="mail")
    assert claimed(mf) == [ids[0].id, ids[2].id, ids[3].id, mail.id]

    body = api.get("/api/limits").json()
    assert [limit["name"] for limit in body["limits"]] == ["kind:sync.account", "queue:mail"]
    sync_limit, mail_limit = body["limits"]
    assert sync_limit == {
        "name": "kind:sync.account",
        "scope": "kind",
        "target": "sync.account",
        "max_running": 3,
        "rate": {"count": 100, "window_seconds": 60.0},
        "max_running_per_key": 1,
        "rate_per_key": None,
        "running": 3,
        "starts_in_window": 3,
        "blocked": True,  # three of three running
        "keys": [
            {
                "key": "a",
                "max_running": 1,
                "rate": None,
                "running": 1,
                "starts_in_window": 0,
                "blocked": True,
            },
            {
                "key": "b",
                "max_running": 1,
                "rate": None,
                "running": 1,
                "starts_in_window": 0,
                "blocked": True,
            },
            {
                "key": "vip",
                "max_running": 2,
                "rate": {"count": 5, "window_seconds": 10.0},
                "running": 1,
                "starts_in_window": 1,
                "blocked": False,
            },
        ],
        "keys_total": 3,
        "keys_blocked": 2,
        "waiting": [ids[1].id],  # the second job of account a
        "waiting_more": False,
    }
    assert mail_limit["max_running"] == 5 and mail_limit["running"] == 1
    assert mail_limit["blocked"] is False and mail_limit["waiting"] == []
    assert mail_limit["keys"] == [] and mail_limit["keys_total"] == 0

    one = api.get("/api/limits/kind:sync.account")
    assert one.status_code == 200 and one.json() == sync_limit
    assert api.get("/api/limits/kind%3Async.account").json() == sync_limit


def test_keys_come_blocked_first_then_busiest_and_are_capped(api: Api, mf: MailFathom) -> None:
    @mf.job("deliver", limit_key=lambda payload: payload["domain"], max_running_per_key=2)
    def deliver(ctx: object, domain: str) -> None: ...

    mf.limits.sync()
    # d00..d09 get two jobs each (both run: blocked), d10..d29 one each (room left)
    domains = [f"d{i:02}" for i in range(10)] * 2 + [f"d{i:02}" for i in range(10, 30)]
    mf.enqueue_many("deliver", [{"domain": d} for d in domains])
    waiting = mf.enqueue_many("deliver", [{"domain": "d03"}, {"domain": "d07"}])
    assert len(claimed(mf, 100)) == 40

    listed = api.get("/api/limits", params={"keys": 12}).json()["limits"][0]
    assert listed["keys_total"] == 30 and listed["keys_blocked"] == 10
    keys = [(row["key"], row["running"], row["blocked"]) for row in listed["keys"]]
    assert keys == [(f"d{i:02}", 2, True) for i in range(10)] + [
        ("d10", 1, False),
        ("d11", 1, False),
    ]
    assert listed["waiting"] == sorted(job.id for job in waiting)
    assert len(api.get("/api/limits").json()["limits"][0]["keys"]) == 20  # the default
    assert len(api.get("/api/limits/kind:deliver").json()["keys"]) == 30  # all, up to 1000
    assert len(api.get("/api/limits/kind:deliver", params={"keys": 3}).json()["keys"]) == 3


def test_a_rate_used_up_blocks_until_its_window_passes(
    api: Api, mf: MailFathom, clock: FakeClock
) -> None:
    @mf.job("report", rate="2/min")
    def report(ctx: object) -> None: ...

    mf.limits.sync()
    jobs = mf.enqueue_many("report", [{}] * 3)
    assert len(claimed(mf)) == 2
    mf.store.claims.record_outcomes(
        owner="w1",
        now=clock.now(),
        succeeded=[(job.id, job.attempts) for job in mf.jobs.list(state=JobState.CLAIMED)],
    )
    limit = api.get("/api/limits/kind:report").json()
    assert (limit["running"], limit["starts_in_window"], limit["blocked"]) == (0, 2, True)
    assert limit["waiting"] == [jobs[2].id]
    clock.advance(timedelta(seconds=61))
    limit = api.get("/api/limits/kind:report").json()
    assert (limit["starts_in_window"], limit["blocked"], limit["waiting"]) == (0, False, [])


def test_bad_input_and_unknown_limits_are_refused(api: Api, mf: MailFathom) -> None:
    mf.limit_queue("mail", max_running=1)
    mf.limits.sync()
    for path, params, message in [
        ("/api/limits", {"keys": "0"}, "keys must be a whole number from 1 to 1000, not '0'"),
        ("/api/limits", {"keys": "1001"}, "keys must be a whole number from 1 to 1000"),
        ("/api/limits/queue:mail", {"keys": "many"}, "keys must be a whole number"),
    ]:
        answer = api.get(path, params=params)
        assert answer.status_code == 400, answer.body
        assert answer.json()["error"]["type"] == "InvalidInput"
        assert message in answer.json()["error"]["message"]
    for name in ["queue:other", "kind:mail", "mail", "queue:mail/x"]:
        answer = api.get(f"/api/limits/{name}")
        assert answer.status_code == 404, name
        error = answer.json()["error"]
        assert error["type"] == "NotFound"
        assert f"no limit named {name!r} is stored" in error["message"]
        assert "kind:<kind> or queue:<queue>" in error["message"]
    assert api.get("/api/limits", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert api.get("/api/limits/queue:mail", headers={}).status_code == 401

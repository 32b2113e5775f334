"""The console's limits pages on every store: each limit's values and use, its keys (capped,
blocked first), links to the jobs waiting on it; and on a waiting job's page, the limit
that holds it back."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from consolekit import make_client
from mailfathom import MailFathom
from mailfathom.clock import FakeClock
from mailfathom.console.limits import rate_text
from mailfathom.testing import claim
from mailfathom.web.limit_pages import KEYS_LISTED

LEASE = timedelta(seconds=30)


@pytest.fixture
def client(mf: MailFathom) -> Any:
    return make_client(mf)


def rows(html: str, table: str) -> list[list[str]]:
    """The body rows of the first ``<table class="{table}">`` as lists of cell texts."""
    found = re.search(rf'<table class="{table}">(.*?)</table>', html, re.S)
    assert found, f"no {table} table"
    body = found.group(1).split("<tbody>")[1]
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        ({"count": 100, "window_seconds": 60.0}, "100/min"),
        ({"count": 5, "window_seconds": 10.0}, "5/10s"),
        ({"count": 20, "window_seconds": 1.0}, "20/s"),
        ({"count": 3, "window_seconds": 0.25}, "3/250ms"),
        ({"count": 2, "window_seconds": 90.0}, "2/90s"),
        ({"count": 7, "window_seconds": 7200.0}, "7/2h"),
        ({"count": 1, "window_seconds": 86400.0}, "1/d"),
        (None, "—"),
    ],
)
def test_a_rate_reads_as_it_is_declared(rate: dict[str, Any] | None, text: str) -> None:
    assert rate_text(rate) == text


def test_no_limit_says_how_to_declare_one(client: Any) -> None:
    html = client.get("/limits").text
    assert "No limit is stored" in html and "max_running=3" in html
    assert '<a href="/limits" class="here">Limits</a>' in html


def test_each_limit_its_use_keys_and_waiting_jobs(client: Any, mf: MailFathom) -> None:
    @mf.job(
        "sync.account",
        max_running=5,
        rate="100/min",
        limit_key=lambda payload: payload["account"],
        max_running_per_key=1,
        key_limits={"vip": {"max_running": 2}},
    )
    def sync(ctx: object, account: str) -> None: ...

    mf.limit_queue("mail", rate="5/10s")
    mf.limits.sync()
    jobs = mf.enqueue_many("sync.account", [{"account": a} for a in ["a", "a", "b", "<i>x</i>"]])
    assert len(claim(mf, "w1", 10, LEASE)) == 3

    html = client.get("/limits").text
    names = re.findall(r'<section class="limit" data-limit="([^"]+)">', html)
    assert names == ["kind:sync.account", "queue:mail"]
    sync_part, mail_part = html.split('data-limit="queue:mail"')
    assert rows(sync_part, "limit-values") == [
        ["whole kind", "5", "100/min", "3", "3", "room"],
        ["each key (default)", "1", "—", "for a key without values of its own"],
    ]
    assert rows(sync_part, "limit-keys") == [
        ["&lt;i&gt;x&lt;/i&gt;", "1", "—", "1", "0", "blocked"],  # escaped, never markup
        ["a", "1", "—", "1", "0", "blocked"],
        ["b", "1", "—", "1", "0", "blocked"],
        ["vip", "2", "—", "0", "0", "room"],
    ]
    assert "3 keys blocked" in sync_part and "<i>x</i>" not in html
    waiting = re.search(r'<p class="waiting">(.*?)</p>', sync_part, re.S)
    assert waiting and re.findall(r'href="/jobs/(\d+)"', waiting.group(1)) == [str(jobs[1].id)]
    assert (
        'href="/jobs?state=Pending&amp;kind=sync.account">every Pending job of kind sync.account'
        in waiting.group(1)
    )
    assert rows(mail_part, "limit-values") == [["whole queue", "—", "5/10s", "0", "0", "room"]]
    assert "No due job waits on it." in mail_part

    one = client.get("/limits/kind:sync.account")
    assert one.status_code == 200
    assert "<h1>kind:sync.account</h1>" in one.text
    assert len(rows(one.text, "limit-keys")) == 4


def test_many_keys_are_capped_blocked_first(client: Any, mf: MailFathom) -> None:
    @mf.job("deliver", limit_key=lambda payload: payload["domain"], max_running_per_key=2)
    def deliver(ctx: object, domain: str) -> None: ...

    mf.limits.sync()
    domains = [f"d{i:02}" for i in range(25)] + ["d20", "d21"] * 2
    mf.enqueue_many("deliver", [{"domain": d} for d in domains])
    assert len(claim(mf, "w1", 100, LEASE)) == 27  # d20, d21: two run, one waits each

    listed = rows(client.get("/limits").text, "limit-keys")
    assert len(listed) == KEYS_LISTED
    assert [row[0] for row in listed[:3]] == ["d20", "d21", "d00"]
    assert listed[0][-1] == "blocked" and listed[2][-1] == "room"
    html = client.get("/limits").text
    assert "25 keys in use or with values of their own, 2 blocked" in html
    assert "the 10 shown: blocked first, then the busiest" in html
    assert len(rows(client.get("/limits/kind:deliver").text, "limit-keys")) == 25


def test_an_unknown_limit_is_a_404_page_saying_what_exists(client: Any) -> None:
    answer = client.get("/limits/kind:nothing")
    assert answer.status_code == 404
    assert "no limit named &#39;kind:nothing&#39; is stored" in answer.text
    assert "kind:&lt;kind&gt; or queue:&lt;queue&gt;" in answer.text


def test_a_waiting_jobs_page_names_the_limit_holding_it(
    client: Any, mf: MailFathom, clock: FakeClock
) -> None:
    @mf.job("sync", limit_key=lambda payload: payload["account"], max_running_per_key=1)
    def sync(ctx: object, account: int) -> None: ...

    @mf.job("report", rate="2/min")
    def report(ctx: object) -> None: ...

    mf.limits.sync()
    first, second = mf.enqueue_many("sync", [{"account": 42}, {"account": 42}])
    reports = mf.enqueue_many("report", [{}] * 3)
    later = mf.enqueue("sync", {"account": 42}, delay=timedelta(hours=1))
    held = mf.enqueue("sync", {"account": 42}, hold=True)
    assert len(claim(mf, "w1", 10, LEASE)) == 3  # one sync of account 42, two reports
    mf.job("free")(lambda ctx: None)
    free = mf.enqueue("free", {})  # no limit on its kind or queue (due, and not claimed)

    def holding(job_id: int) -> str | None:
        html = client.get(f"/jobs/{job_id}").text
        found = re.search(r'<dd class="holding">(.*?)</dd>', html, re.S)
        return None if found is None else re.sub(r"<[^>]+>", "", found.group(1))

    assert holding(second.id) == "waiting on kind:sync key 42: 1 of 1 running"
    assert 'href="/limits/kind%3Async"' in client.get(f"/jobs/{second.id}").text
    assert holding(reports[2].id) == "waiting on kind:report: 2 of 2/min started"
    assert holding(first.id) is None  # running
    assert holding(later.id) is None  # not due yet: no limit holds it
    assert holding(held.id) is None  # held by an operator, not by a limit
    assert holding(free.id) is None
    assert "<dt>limit key</dt><dd><code>42</code></dd>" in client.get(f"/jobs/{held.id}").text
    clock.advance(timedelta(minutes=2))
    assert holding(reports[2].id) is None  # the window passed: it waits for a worker only

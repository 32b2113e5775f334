"""Text that cannot be stored is refused at the edge: a lone surrogate or a NUL in an actor,
a reason, an idempotency key, filter text, a queue or a schedule reason is a clear 400
(API) or InvalidInput (Python API), and nothing changes, on every store.

A lone surrogate (``"\\ud800"``) reaches the API as a JSON escape, and the CLI from a
command-line argument that is not UTF-8; neither store can encode it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from consolekit import dead_letters, make_client, register_demo_kinds, store_schedule
from mailfathom import MailFathom
from mailfathom.console.query import JobQuery
from mailfathom.errors import InvalidInput

SURROGATE = "a\ud800b"
BAD_TEXTS = [SURROGATE, "\udfff", "a\x00b"]

#: (name, method, path template, body); {job} and {email} are filled in.
CASES = [
    ("create-key", "POST", "/api/jobs", {"kind": "demo.ok", "idempotency_key": "{}"}),
    ("create-queue", "POST", "/api/jobs", {"kind": "demo.ok", "queue": "{}"}),
    ("act-reason", "POST", "/api/jobs/{job}/requeue", {"reason": "{}"}),
    ("act-actor", "POST", "/api/jobs/{job}/drop", {"actor": "{}"}),
    ("bulk-reason", "POST", "/api/jobs/bulk/requeue", {"ids": ["{job}"], "reason": "{}"}),
    ("bulk-actor", "POST", "/api/jobs/bulk/drop", {"ids": ["{job}"], "actor": "{}"}),
    ("bulk-filter-text", "POST", "/api/jobs/bulk/requeue", {"filter": {"text": "{}"}}),
    ("bulk-filter-kind", "POST", "/api/jobs/bulk/requeue", {"filter": {"kind": "{}"}}),
    ("queue-reason", "POST", "/api/queues/default/pause", {"reason": "{}"}),
    ("queue-actor", "POST", "/api/queues/mail/resume", {"actor": "{}"}),
    ("queues-name", "POST", "/api/queues/bulk/pause", {"queues": ["{}"]}),
    ("queues-reason", "POST", "/api/queues/bulk/pause", {"queues": ["default"], "reason": "{}"}),
    ("queues-actor", "POST", "/api/queues/bulk/resume", {"queues": ["mail"], "actor": "{}"}),
    ("schedule-reason", "POST", "/api/schedules/reports/nightly/pause", {"reason": "{}"}),
    ("schedule-actor", "POST", "/api/schedules/reports/nightly/pause", {"actor": "{}"}),
    ("email-cancel-reason", "POST", "/api/outbox/{email}/cancel", {"reason": "{}"}),
    (
        "email-resolve-reason",
        "POST",
        "/api/outbox/{email}/resolve",
        {"decision": "give_up", "reason": "{}"},
    ),
    ("email-again-actor", "POST", "/api/outbox/{email}/record-again", {"actor": "{}"}),
]


def _fill(value: Any, text: str, job: int, email: int) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, text, job, email) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, text, job, email) for v in value]
    if value == "{}":
        return text
    if value == "{job}":
        return job
    return value


def _state(mf: MailFathom) -> Any:
    """Everything the cases could change: jobs, audit, queue pauses, schedules, the outbox."""
    return (
        [(j.id, j.state, j.queue, j.idempotency_key) for j in mf.jobs.list(limit=100)],
        [(e.id, e.action) for e in mf.jobs.audit(limit=100)],
        [(q.queue, q.reason) for q in mf.queues.paused()],
        [(e.id, e.action) for e in mf.queues.events(limit=100)],
        [(s.name, s.paused) for s in mf.schedules.list()],
        [(e.id, e.stage) for e in mf.outbox.list(limit=100)],
    )


@pytest.fixture
def world(mf: MailFathom) -> tuple[Any, int, int]:
    """A console client, a dead-lettered job, a recorded email, a schedule, a paused queue."""
    register_demo_kinds(mf)
    [job] = dead_letters(mf, 1)
    store_schedule(mf)
    mf.queues.pause("mail", actor="ops")
    email = mf.outbox.record(
        b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello",
        sender="a@example.com",
        recipients=["b@example.com"],
    )
    return make_client(mf), job, email.id


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_text_that_cannot_be_stored_is_a_400_and_changes_nothing(
    world: tuple[Any, int, int], mf: MailFathom, case: tuple[str, str, str, dict[str, Any]]
) -> None:
    client, job, email = world
    name, method, path, body = case
    before = _state(mf)
    for text in BAD_TEXTS:
        content = json.dumps(_fill(body, text, job, email)).encode()  # ASCII: \ud800 escapes
        answer = client.request(
            method,
            path.format(job=job, email=email),
            content=content,
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 400, (name, ascii(text), answer.status_code, answer.text)
        assert answer.json()["error"]["type"] == "InvalidInput"
        assert _state(mf) == before


PYTHON_API: list[tuple[str, Callable[[MailFathom, int, int, str], object]]] = [
    ("enqueue-key", lambda mf, job, email, t: mf.enqueue("demo.ok", {}, idempotency_key=t)),
    ("requeue-reason", lambda mf, job, email, t: mf.jobs.requeue(job, actor="ops", reason=t)),
    ("drop-actor", lambda mf, job, email, t: mf.jobs.drop(job, actor=t)),
    ("pause-queue-reason", lambda mf, job, email, t: mf.queues.pause("q", actor="o", reason=t)),
    (
        "pause-schedule-reason",
        lambda mf, job, email, t: mf.schedules.pause("reports/nightly", actor="ops", reason=t),
    ),
    ("cancel-email-actor", lambda mf, job, email, t: mf.outbox.cancel(email, actor=t)),
    ("filter-text", lambda mf, job, email, t: JobQuery.parse({"text": t})),
    (
        "record-key",
        lambda mf, job, email, t: mf.outbox.record(
            b"Subject: x\r\n\r\nx",
            sender="a@example.com",
            recipients=["b@example.com"],
            idempotency_key=t,
        ),
    ),
]


@pytest.mark.parametrize(("name", "call"), PYTHON_API, ids=[c[0] for c in PYTHON_API])
def test_the_python_api_refuses_the_same_text(
    world: tuple[Any, int, int], mf: MailFathom, name: str, call: Any
) -> None:
    _, job, email = world
    before = _state(mf)
    with pytest.raises(InvalidInput, match="lone surrogate") as refused:
        call(mf, job, email, SURROGATE)
    assert "position 1" in str(refused.value)
    str(refused.value).encode()  # the message itself can be printed and sent as UTF-8
    assert _state(mf) == before


def test_good_text_with_real_characters_still_goes_through(
    world: tuple[Any, int, int], mf: MailFathom
) -> None:
    client, job, _ = world
    reason = "relay fixed 😀 — ünïcode"
    answer = client.post(f"/api/jobs/{job}/requeue", json={"reason": reason, "actor": "bø"})
    assert answer.status_code == 200, answer.text
    event = mf.jobs.audit(limit=1)[0]
    assert event.reason == reason and event.actor == "api:bø"

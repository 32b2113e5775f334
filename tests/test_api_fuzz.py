"""A hypothesis fuzz of job payloads through the API and the New-job form, on every store.

JSON text is built by hand, so it can hold what ``json.dumps`` would refuse to write:
integers of thousands of digits, lone surrogates and NUL as escapes, nesting from a few
levels to a hundred thousand (balanced or not), big strings. Every answer is 201/303
(created, and the job reads back exactly as sent: payload and priority) or 400 (and
nothing was written); never a 500. Few examples per store keep it to seconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consolekit import csrf_of, make_client, register_demo_kinds
from mailfathom import MailFathom

# Only the generation-speed check is off: building examples of 300,000 characters may be
# slow on a loaded machine, which says nothing about the code under test. Every other
# health check holds.
FUZZ = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_numbers = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.text("0123456789", min_size=1, max_size=6000).map(lambda d: d.lstrip("0") or "0"),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
)
_characters = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.sampled_from(["\x00", "\u2028", "\ufeff", "\U0010ffff", '"', "\\"]),
)
_strings = st.one_of(
    st.text(_characters, max_size=40),
    st.integers(0, 300_000).map(lambda n: "x" * n),
).map(lambda s: json.dumps(s, ensure_ascii=True))
_leaves = st.one_of(st.sampled_from(["null", "true", "false"]), _numbers, _strings)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(_strings, inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"
        ),
    ),
    max_leaves=12,
)
_deep = st.one_of(
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.just("[" * 100_000),
)
_payloads = st.one_of(
    _values.map(lambda v: '{"v":' + v + "}"),
    _deep.map(lambda v: '{"v":' + v + "}"),
    _values,
)


def _count(mf: MailFathom) -> int:
    return sum(mf.jobs.counts().values())


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    return make_client(mf)


def test_fuzzed_payloads_through_the_api_are_created_exactly_or_refused(
    client: Any, mf: MailFathom
) -> None:
    @FUZZ
    @given(payload=_payloads, priority=st.one_of(st.none(), _numbers))
    def check(payload: str, priority: str | None) -> None:
        before = _count(mf)
        body = '{"kind":"demo.ok","hold":true,"payload":' + payload
        body += ("" if priority is None else ',"priority":' + priority) + "}"
        answer = client.post(
            "/api/jobs", content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code in (201, 400), (answer.status_code, answer.text[:300])
        if answer.status_code == 400:
            assert _count(mf) == before
            return
        assert _count(mf) == before + 1
        shown = client.get(f"/api/jobs/{answer.json()['id']}")
        assert shown.status_code == 200
        assert shown.json()["job"]["payload"] == json.loads(payload)

    check()


def test_fuzzed_payloads_through_the_form_are_created_exactly_or_refused(
    client: Any, mf: MailFathom
) -> None:
    token = csrf_of(client.get("/jobs/new").text)

    @FUZZ
    @given(payload=_payloads, priority=st.one_of(_numbers, st.text(max_size=12)))
    def check(payload: str, priority: str) -> None:
        before = _count(mf)
        answer = client.post(
            "/jobs/new",
            data={"csrf_token": token, "kind": "demo.ok", "payload": payload, "priority": priority},
            follow_redirects=False,
        )
        assert answer.status_code in (303, 400), (answer.status_code, answer.text[:300])
        if answer.status_code == 400:
            assert _count(mf) == before
            assert '<p class="error" role="alert">' in answer.text
            return
        assert _count(mf) == before + 1
        location = answer.headers["location"]
        assert location.startswith("/jobs/")
        job = mf.jobs.get(int(location.removeprefix("/jobs/")))
        assert (job.kind, job.held) == ("demo.ok", True)
        assert job.payload == json.loads(payload)
        assert job.priority == int(priority.strip() or "0")
        assert client.get(location).status_code == 200

    check()

"""A property-based fuzz of the JSON API against its own OpenAPI document (schemathesis).

Generated requests — valid and invalid — go to every documented operation on
every store; no answer may be a server error, and every answer must match the
document (status codes, content type, body schema). Few examples per operation
keep the suite fast; the value is in the breadth.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from consolekit import TOKEN, dead_letters, register_demo_kinds, register_worker, store_schedule
from mailfathom import MailFathom
from mailfathom.console import Console
from mailfathom.testing import claim
from mailfathom.web import Access, create_app
from mailfathom.web.openapi import document

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def app(database_url: str) -> Iterator[Any]:
    """The console on a fresh database with dead letters and a held job to act on, and a
    limit in use with a job waiting on it."""
    mf = MailFathom(database_url)
    mf.migrate()
    register_demo_kinds(mf)
    store_schedule(mf)
    register_worker(mf, "w-1")
    dead_letters(mf, 3)
    mf.enqueue("demo.ok", {}, hold=True)
    mf.limit_kind("demo.ok", max_running=1, rate="5/min", max_running_per_key=1)
    mf.limits.sync()
    mf.queue.enqueue_many("demo.ok", [{}, {}], limit_keys=["a", "a"])
    claim(mf, "w-1", 5, timedelta(seconds=60))  # one runs, the other waits on the limit
    yield create_app(Console(mf), access=Access.for_bind("127.0.0.1", TOKEN))
    mf.close()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_api_answers_every_generated_request_as_documented(
    app: Any, mode: GenerationMode
) -> None:
    """Valid requests (positive) and requests that break the document (negative: wrong
    types, out-of-range ids and cursors, unknown fields) alike."""
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", app, headers=AUTH)
    results = list(schema.get_all_operations())
    assert all(isinstance(result, Ok) for result in results), "the document has invalid parts"
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == sum(len(ops) for ops in document()["paths"].values()) == 33

    for operation in operations:
        inputs = len(operation.query) + len(operation.path_parameters) + len(operation.body)
        if mode is GenerationMode.NEGATIVE and not inputs:
            continue  # nothing to break: the positive run covers it

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=12 if mode is GenerationMode.POSITIVE else 4,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def answers_as_documented(case: Any) -> None:
            case.call_and_validate(
                headers=AUTH,
                checks=[
                    not_a_server_error,
                    status_code_conformance,
                    content_type_conformance,
                    response_schema_conformance,
                ],
            )

        answers_as_documented()

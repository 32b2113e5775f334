"""Hostile lengths against every pattern applied to input: each is refused at once.

Before its length was bounded, ``GET /jobs?older_than=<16,000 digits>`` held the process
for about 7 s on a quiet machine (the duration pattern backtracked quadratically; a
64 KiB head took minutes), freezing every other request. Now each such input is a 400 /
clear error well within a second, whatever its length; the bound is 1 s so a loaded
machine cannot make the test flaky, while the old behaviour exceeds it many times over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from consolekit import make_client, register_demo_kinds
from mailfathom import MailFathom
from mailfathom.console.query import DURATION_LONGEST, JobQuery, parse_duration
from mailfathom.errors import ConfigurationError, InvalidInput
from mailfathom.jobs.flow.limits import parse_rate
from mailfathom.jobs.registry import check_name
from mailfathom.retention import parse_duration as retention_period

#: Seconds any refusal may take, on a loaded machine.
BOUND = 1.0
DIGITS = ["1" * 16_000, "1" * 65_000, "1 " * 10_000 + "x", "1s" * 30_000 + "1"]


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    try:
        result = call()
    except (InvalidInput, ConfigurationError) as exc:
        result = exc
    return result, time.perf_counter() - started


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The console on SQLite (the patterns run before any store is asked)."""
    with MailFathom(f"sqlite:///{tmp_path_factory.mktemp('db') / 'c.db'}") as mf:
        mf.migrate()
        register_demo_kinds(mf)
        yield make_client(mf)


@pytest.mark.parametrize("text", DIGITS, ids=["16k-digits", "65k-digits", "spaced", "pairs"])
@pytest.mark.parametrize(
    "path", ["/jobs?older_than={}", "/api/jobs?newer_than={}", "/jobs/bulk?older_than={}"]
)
def test_a_long_age_filter_is_a_400_at_once(client: Any, path: str, text: str) -> None:
    answer, took = timed(lambda: client.get(path.format(text)))
    assert answer.status_code == 400, answer.text[:300]
    assert took < BOUND, f"{took:.2f} s to refuse a {len(text)}-character age"
    assert text not in answer.text  # the refusal quotes a little of it, not all


@pytest.mark.parametrize("text", DIGITS, ids=["16k-digits", "65k-digits", "spaced", "pairs"])
def test_a_long_filter_in_a_bulk_body_is_a_400_at_once(client: Any, text: str) -> None:
    body = {"filter": {"older_than": text}}
    answer, took = timed(lambda: client.post("/api/jobs/bulk/requeue", json=body))
    assert answer.status_code == 400 and took < BOUND, (answer.text[:300], took)


def test_a_duration_is_refused_for_its_length_before_any_pattern() -> None:
    refused, took = timed(lambda: parse_duration("1" * 16_000, what="older_than"))
    assert isinstance(refused, InvalidInput) and took < BOUND
    assert f"at most {DURATION_LONGEST}" in str(refused) and "16000 characters" in str(refused)
    assert parse_duration(" 1h\t30m ").total_seconds() == 5400  # spaces of any kind


@pytest.mark.parametrize(
    "name", ["1/" + " " * 64_000 + "!", "1" + " " * 64_000, "1/ " + "5" * 64_000 + " !"]
)
def test_a_long_rate_is_refused_at_once(name: str) -> None:
    refused, took = timed(lambda: parse_rate(name))
    assert isinstance(refused, InvalidInput) and took < BOUND, took
    assert parse_rate(" 5 / 10 s ") == parse_rate("5/10s")


@pytest.mark.parametrize("value", ["1" + " " * 64_000 + "!", " " * 64_000 + "1"])
def test_a_long_retention_period_is_refused_at_once(value: str) -> None:
    refused, took = timed(lambda: retention_period("job_retention", value))
    assert isinstance(refused, ConfigurationError) and took < BOUND, took
    assert retention_period("x", " 7d ") == retention_period("x", "7d")


@pytest.mark.parametrize("field", ["kind", "queue", "text", "state"])
def test_long_names_and_filter_text_are_refused_at_once(field: str) -> None:
    refused, took = timed(lambda: JobQuery.parse({field: "a" * 65_000 + "!"}))
    assert isinstance(refused, InvalidInput) and took < BOUND, took
    refused, took = timed(lambda: check_name("queue", "a/" * 32_000 + "!", longest=100))
    assert isinstance(refused, InvalidInput) and took < BOUND, took


def test_the_dev_inbox_and_mount_patterns_are_linear(tmp_path: Path) -> None:
    """The other patterns on input (multipart detection in a captured message, links in a
    mounted console's pages) take time linear in their input."""
    from mailfathom.web.mount import _LINK
    from mailfathom.web.preview import _MULTIPART

    for pattern, text in (
        (_MULTIPART, b"content-type:" + b" " * 2_000_000 + b"text/plain"),
        (_MULTIPART, b"\ncontent-type: " * 200_000),
        (_LINK, b" href=" * 400_000 + b"'x"),
    ):
        _, took = timed(lambda p=pattern, t=text: p.search(t))  # type: ignore[misc]
        assert took < BOUND, took

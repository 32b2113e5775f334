"""Structured logs: ``--log-format json`` lines parse, and carry the fields passed in
``extra`` (the per-attempt line's above all)."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mailfathom import JobContext, MailFathom, PermanentFailure
from mailfathom.observability.logs import JsonFormatter, configure


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Records of the ``mailfathom`` loggers at INFO, formatted as JSON into a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("mailfathom")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield buffer
    logger.removeHandler(handler)
    logger.setLevel(before)


def parsed(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_attempt_lines_carry_their_fields_as_json(mf: MailFathom, json_lines: io.StringIO) -> None:
    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        pass

    @mf.job("bad")
    def bad(ctx: JobContext) -> None:
        raise PermanentFailure("it broke")

    good = mf.enqueue("ok", {})
    failed = mf.enqueue("bad", {})
    worker = mf.worker()
    worker.run(burst=True)
    lines = parsed(json_lines)
    attempts = {line["job_id"]: line for line in lines if line["message"].startswith("attempt ")}
    success, failure = attempts[good.id], attempts[failed.id]
    assert success["level"] == "INFO"
    assert success["logger"] == "mailfathom.worker"
    assert {k: success[k] for k in ("kind", "queue", "attempt", "outcome", "worker")} == {
        "kind": "ok",
        "queue": "default",
        "attempt": 1,
        "outcome": "Succeeded",
        "worker": worker.id,
    }
    assert isinstance(success["duration"], float)
    assert failure["level"] == "WARNING"
    assert failure["outcome"] == "Failed"
    assert failure["error"] == "it broke"
    assert 'raise PermanentFailure("it broke")' in failure["traceback"]
    assert all(isinstance(line["ts"], str) and line["ts"].endswith("+00:00") for line in lines)


def test_extra_fields_tracebacks_and_unserialisable_values() -> None:
    formatter = JsonFormatter()
    logger = logging.getLogger("mailfathom.test")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logger.makeRecord(
            "mailfathom.test",
            logging.ERROR,
            __file__,
            1,
            "failed %s",
            ("here",),
            exc_info=sys.exc_info(),
            extra={"mailfathom": {"job_id": 3}, "custom": {1, 2}},
        )
    line = json.loads(formatter.format(record))
    assert line["message"] == "failed here"
    assert line["job_id"] == 3
    assert line["custom"] == repr({1, 2})
    assert "ValueError: boom" in line["exc_info"]
    assert "mailfathom" not in line


def test_configure_replaces_the_root_handlers() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        configure("warning", "json")
        configure("info", "json")
        assert len(root.handlers) == 1
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        assert root.level == logging.INFO
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)

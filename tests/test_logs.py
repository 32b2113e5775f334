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

from mailfathom import FakeClock, JobContext, MailFathom, PermanentFailure
from mailfathom.jobs.worker.interruptions import stop_lost
from mailfathom.observability.logs import JsonFormatter, configure, log_fields
from smtp_fixtures import FaultServer


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


def action(buffer: io.StringIO, name: str) -> list[dict[str, Any]]:
    """The JSON lines of one ``action``."""
    return [line for line in parsed(buffer) if line.get("action") == name]


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
    assert success["logger"] == "mailfathom.jobs.worker.runner"
    assert success["action"] == "attempt"
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


def test_worker_start_and_stop_lines_carry_their_fields(
    mf: MailFathom, json_lines: io.StringIO
) -> None:
    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        pass

    mf.enqueue("ok", {})
    mf.enqueue("ok", {})
    worker = mf.worker(concurrency=3, queues=["default"])
    worker.run(burst=True)
    (started,) = action(json_lines, "worker_started")
    assert started["logger"] == "mailfathom.jobs.worker.worker"
    assert {k: started[k] for k in ("worker", "queues", "concurrency", "lease", "kinds")} == {
        "worker": worker.id,
        "queues": ["default"],
        "concurrency": 3,
        "lease": 30.0,
        "kinds": ["mailfathom.deliver", "ok"],
    }
    (stopped,) = action(json_lines, "worker_stopped")
    assert (stopped["worker"], stopped["attempts"]) == (worker.id, 2)


def test_delivery_stage_lines_carry_their_fields(
    mail_app: MailFathom, smtp: FaultServer, json_lines: io.StringIO
) -> None:
    message = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"
    email = mail_app.outbox.record(message, sender="a@example.com", recipients=["b@example.com"])
    mail_app.worker().run(burst=True)
    assert len(smtp.accepted()) == 1
    (stage,) = action(json_lines, "email_stage")
    assert stage["logger"] == "mailfathom.delivery.deliver"
    assert {k: stage[k] for k in ("email_id", "attempt", "from_stage", "to_stage")} == {
        "email_id": email.id,
        "attempt": 1,
        "from_stage": "TransmissionBegun",
        "to_stage": "Sent",
    }
    assert stage["reply_code"] == 250
    assert stage["reason"] is None


def test_lost_lease_lines_carry_their_fields(mf: MailFathom, json_lines: io.StringIO) -> None:
    job = mf.jobs.get(mf.enqueue("ok", {}).id)
    stop_lost([], [job])
    (lost,) = action(json_lines, "lease_lost")
    assert lost["level"] == "WARNING"
    assert {k: lost[k] for k in ("job_id", "kind", "attempt", "started")} == {
        "job_id": job.id,
        "kind": "ok",
        "attempt": 0,
        "started": False,
    }


def test_pruner_lines_carry_their_fields(
    mf: MailFathom, clock: FakeClock, json_lines: io.StringIO
) -> None:
    @mf.job("ok")
    def ok(ctx: JobContext) -> None:
        pass

    mf.enqueue("ok", {}, idempotency_key="one")
    mf.enqueue("ok", {}, idempotency_key="two")
    mf.worker().run(burst=True)
    clock.advance(8 * 86400)
    report = mf.prune()
    assert report.total == 2
    (pruned,) = action(json_lines, "prune")
    assert pruned["logger"] == "mailfathom.jobs.pruner"
    assert pruned["pruned"] == 2
    assert pruned["rows"]["jobs"]["Succeeded"]["compacted"] == 2
    assert isinstance(pruned["pruner"], str) and pruned["pruner"]


def test_log_fields_names_the_action_first() -> None:
    assert log_fields("attempt", job_id=1) == {"mailfathom": {"action": "attempt", "job_id": 1}}

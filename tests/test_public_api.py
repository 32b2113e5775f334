"""The public face: a sorted, complete ``__all__`` and one exception root."""

from __future__ import annotations

import inspect

import mailfathom
from mailfathom import errors

EXPECTED = {
    "AsyncJobs",
    "AsyncLimits",
    "AsyncMailFathom",
    "AsyncOutbox",
    "AsyncQueues",
    "AsyncSchedules",
    "AsyncSuppressions",
    "AsyncWorkers",
    "Attempt",
    "AttemptOutcome",
    "Backoff",
    "BatchIds",
    "CancelledEmail",
    "Clock",
    "DsnRecipient",
    "DsnReport",
    "ConfigurationError",
    "EnqueuedJob",
    "FailureClass",
    "FakeClock",
    "FlowLimit",
    "IllegalTransition",
    "InvalidInput",
    "InvalidMessage",
    "Job",
    "JobAborted",
    "JobContext",
    "JobEvent",
    "JobState",
    "Jobs",
    "KeyLimit",
    "LeaseLost",
    "Limits",
    "MailFathom",
    "MailFathomError",
    "NotFound",
    "Outbox",
    "OutboxEvent",
    "OutgoingEmail",
    "OutgoingEmailStage",
    "PausedQueue",
    "PayloadError",
    "PermanentFailure",
    "PruneReport",
    "Pruner",
    "QueueEvent",
    "QueueSummary",
    "Queues",
    "RecipientOutcome",
    "RecordedEmail",
    "Resolution",
    "ResultError",
    "RetentionStore",
    "Schedule",
    "Schedules",
    "Settings",
    "Snooze",
    "StoreError",
    "SystemClock",
    "TransientFailure",
    "HttpJsonTransport",
    "SesTransport",
    "SmtpTransport",
    "Submission",
    "SubmissionOutcome",
    "SubmissionPhase",
    "SubmissionReply",
    "Suppression",
    "SuppressionEvent",
    "Suppressions",
    "Transport",
    "Worker",
    "WorkerInfo",
    "Workers",
}


def test_all_is_sorted_and_exactly_the_public_api() -> None:
    assert mailfathom.__all__ == sorted(mailfathom.__all__)
    assert set(mailfathom.__all__) == EXPECTED
    for name in mailfathom.__all__:
        assert getattr(mailfathom, name) is not None


def test_every_public_thing_has_a_docstring() -> None:
    for name in mailfathom.__all__:
        assert inspect.getdoc(getattr(mailfathom, name)), name


def test_every_error_descends_from_the_root_and_is_drawn_in_the_tree() -> None:
    tree = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.MailFathomError)
        assert name in tree
        assert str(cls()) == inspect.getdoc(cls)


def test_state_names_are_the_stored_names() -> None:
    assert [s.value for s in mailfathom.JobState] == [
        "Pending",
        "Claimed",
        "Succeeded",
        "DeadLettered",
        "Dropped",
    ]
    assert [f.value for f in mailfathom.FailureClass] == ["Permanent", "Transient"]


def test_stage_names_are_the_stored_names() -> None:
    assert [s.value for s in mailfathom.OutgoingEmailStage] == [
        "Recorded",
        "TransmissionBegun",
        "Sent",
        "Refused",
        "Cancelled",
    ]
    assert [r.value for r in mailfathom.Resolution] == ["delivered", "send_again", "give_up"]

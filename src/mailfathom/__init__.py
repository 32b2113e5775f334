"""mailfathom: a durable job queue and crash-safe outgoing email on SQLite or PostgreSQL.

Everything public is importable from here; every other module is internal.
"""

from mailfathom.app import MailFathom
from mailfathom.clock import Clock, FakeClock, SystemClock
from mailfathom.config import Settings
from mailfathom.delivery.model import (
    CancelledEmail,
    OutboxEvent,
    OutgoingEmail,
    RecipientOutcome,
    RecordedEmail,
)
from mailfathom.delivery.resolution import Resolution
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import (
    ConfigurationError,
    IllegalTransition,
    InvalidInput,
    InvalidMessage,
    LeaseLost,
    MailFathomError,
    NotFound,
    PayloadError,
    StoreError,
)
from mailfathom.jobs.admin.queues import PausedQueue, QueueEvent, QueueSummary
from mailfathom.jobs.admin.workers import WorkerInfo
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.failures import JobAborted, PermanentFailure, Snooze, TransientFailure
from mailfathom.jobs.model import Attempt, EnqueuedJob, Job, JobEvent
from mailfathom.jobs.retry import Backoff
from mailfathom.jobs.schedules.schedule_admin import Schedule
from mailfathom.jobs.state import AttemptOutcome, FailureClass, JobState
from mailfathom.jobs.worker.worker import Worker

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "Backoff",
    "CancelledEmail",
    "Clock",
    "ConfigurationError",
    "EnqueuedJob",
    "FailureClass",
    "FakeClock",
    "IllegalTransition",
    "InvalidInput",
    "InvalidMessage",
    "Job",
    "JobAborted",
    "JobContext",
    "JobEvent",
    "JobState",
    "LeaseLost",
    "MailFathom",
    "MailFathomError",
    "NotFound",
    "OutboxEvent",
    "OutgoingEmail",
    "OutgoingEmailStage",
    "PausedQueue",
    "PayloadError",
    "PermanentFailure",
    "QueueEvent",
    "QueueSummary",
    "RecipientOutcome",
    "RecordedEmail",
    "Resolution",
    "Schedule",
    "Settings",
    "Snooze",
    "StoreError",
    "SystemClock",
    "TransientFailure",
    "Worker",
    "WorkerInfo",
]

__version__ = "0.1.0"

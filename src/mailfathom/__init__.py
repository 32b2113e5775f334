"""mailfathom: a durable job queue and crash-safe outgoing email on SQLite or PostgreSQL.

The public modules, and only these, are the API; each lists its names in ``__all__``:

- ``mailfathom``: the application (:class:`MailFathom`, and :class:`AsyncMailFathom`
  to await it), its operator views, the job and
  email models, the failures a handler raises, the errors, the settings and clocks;
- ``mailfathom.testing``: a pytest plugin and helpers for tests of applications
  (``drain``, ``assert_enqueued``, ``claim``, the capture SMTP server);
- ``mailfathom.devmail``: the capture SMTP server and Maildir inbox ``mailfathom dev`` runs;
- ``mailfathom.web``: the console as an ASGI app to mount (``create_app``);
- ``mailfathom.observability``: metrics, database gauges, health checks, the metrics
  server, JSON logs and tracing;
- ``mailfathom.contrib.django``, ``mailfathom.contrib.flask``,
  ``mailfathom.contrib.starlette``: the framework integrations.

Every other module is internal: its names may change in any release.
"""

from mailfathom.aio import (
    AsyncJobs,
    AsyncLimits,
    AsyncMailFathom,
    AsyncOutbox,
    AsyncQueues,
    AsyncSchedules,
    AsyncSuppressions,
    AsyncWorkers,
)
from mailfathom.app import MailFathom
from mailfathom.batch_ids import BatchIds
from mailfathom.clock import Clock, FakeClock, SystemClock
from mailfathom.config import Settings
from mailfathom.delivery.dsn import DsnRecipient
from mailfathom.delivery.http_json import HttpJsonTransport
from mailfathom.delivery.model import (
    CancelledEmail,
    OutboxEvent,
    OutgoingEmail,
    RecipientOutcome,
    RecordedEmail,
)
from mailfathom.delivery.outbox import Outbox
from mailfathom.delivery.resolution import Resolution
from mailfathom.delivery.ses import SesTransport
from mailfathom.delivery.smtp import Outcome as SubmissionOutcome
from mailfathom.delivery.smtp import Phase as SubmissionPhase
from mailfathom.delivery.smtp import Reply as SubmissionReply
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.delivery.suppressions import DsnReport, Suppression, SuppressionEvent, Suppressions
from mailfathom.delivery.transport import SmtpTransport, Submission, Transport
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
from mailfathom.jobs.admin.admin import Jobs
from mailfathom.jobs.admin.limits import Limits
from mailfathom.jobs.admin.queues import PausedQueue, QueueEvent, Queues, QueueSummary
from mailfathom.jobs.admin.workers import WorkerInfo, Workers
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.failures import (
    JobAborted,
    PermanentFailure,
    ResultError,
    Snooze,
    TransientFailure,
)
from mailfathom.jobs.flow.limits import FlowLimit, KeyLimit
from mailfathom.jobs.model import Attempt, EnqueuedJob, Job, JobEvent
from mailfathom.jobs.pruner import Pruner, PruneReport
from mailfathom.jobs.retry import Backoff
from mailfathom.jobs.schedules.schedule_admin import Schedule, Schedules
from mailfathom.jobs.state import AttemptOutcome, FailureClass, JobState
from mailfathom.jobs.worker.worker import Worker
from mailfathom.store.retention.repository import RetentionStore

__all__ = [
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
    "ConfigurationError",
    "DsnRecipient",
    "DsnReport",
    "EnqueuedJob",
    "FailureClass",
    "FakeClock",
    "FlowLimit",
    "HttpJsonTransport",
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
    "SesTransport",
    "Settings",
    "SmtpTransport",
    "Snooze",
    "StoreError",
    "Submission",
    "SubmissionOutcome",
    "SubmissionPhase",
    "SubmissionReply",
    "Suppression",
    "SuppressionEvent",
    "Suppressions",
    "SystemClock",
    "TransientFailure",
    "Transport",
    "Worker",
    "WorkerInfo",
    "Workers",
]

__version__ = "0.1.0"

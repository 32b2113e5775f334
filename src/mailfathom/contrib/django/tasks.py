"""``TASKS = {"default": {"BACKEND": "mailfathom.contrib.django.TaskBackend"}}``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Django's tasks framework (Django 6's ``django.tasks``; on Django 5.2 its backport,
the ``django-tasks`` package, whose ``@task`` this backend serves) runs ``@task``
functions here as mailfathom jobs of one kind, ``django.task``: leases, retries
with backoff, dead-lettering and the console come with them. ``task.enqueue(...)``
writes the job on Django's connection, so inside ``transaction.atomic()`` it
commits or rolls back with the block. The result's id is the job's id.

``OPTIONS``: ``MAX_ATTEMPTS`` (attempts per task, default mailfathom's 20).
A task's return value is normalised as Django's own backends do (``normalize_json``:
tuples become lists, bytes text) and stored on its Succeeded job; ``get_result()``'s
``return_value`` reads it back (None once retention compacted the job). A value Django
cannot normalise, or that is not JSON once normalised, fails the task at once
(:class:`~mailfathom.ResultError`, permanent), as Django's immediate backend fails it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.utils.module_loading import import_string
from django_tasks import TaskContext, TaskResult, TaskResultStatus
from django_tasks.backends.base import BaseTaskBackend
from django_tasks.base import Task, TaskError
from django_tasks.exceptions import TaskResultDoesNotExist
from django_tasks.utils import normalize_json
from typing_extensions import ParamSpec

from mailfathom.app import MailFathom
from mailfathom.contrib.django.app import enqueue, get_app, on_build, with_django_connections
from mailfathom.errors import NotFound
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.failures import PermanentFailure, ResultError
from mailfathom.jobs.model import Job
from mailfathom.jobs.state import JobState

__all__ = ["TASK_KIND", "TaskBackend", "register_task_kind"]

#: The job kind every Django task runs as; the task's dotted path is in its payload.
TASK_KIND = "django.task"

T = TypeVar("T")
P = ParamSpec("P")

_STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.CLAIMED: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD_LETTERED: TaskResultStatus.FAILED,
    JobState.DROPPED: TaskResultStatus.FAILED,
}


class TaskBackend(BaseTaskBackend):
    """Runs Django ``@task`` functions on mailfathom workers (``manage.py mailfathom worker``)."""

    supports_defer = True
    supports_priority = True
    supports_get_result = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        attempts = self.options.get("MAX_ATTEMPTS")
        self.max_attempts: int | None = None if attempts is None else int(attempts)

    def enqueue(
        self,
        task: Task[P, T],
        args: P.args,  # type: ignore[valid-type]
        kwargs: P.kwargs,  # type: ignore[valid-type]
    ) -> TaskResult[T]:
        """Enqueue ``task`` as a job in the caller's transaction; READY until a worker runs it."""
        self.validate_task(task)
        job = enqueue(
            TASK_KIND,
            {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs)},
            queue=task.queue_name,
            priority=task.priority,
            run_at=task.run_after,
            max_attempts=self.max_attempts,
        )
        return self._result(task, job)

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The task's state now, from its job; ``TaskResultDoesNotExist`` for an unknown id."""
        try:
            stored = get_app().jobs.get(int(result_id))
        except (ValueError, NotFound) as exc:
            raise TaskResultDoesNotExist(result_id) from exc
        if stored.kind != TASK_KIND:
            raise TaskResultDoesNotExist(result_id)
        task = import_string(stored.payload["task"])
        errors = [
            TaskError(
                exception_class_path=attempt.error_type or "", traceback=attempt.traceback or ""
            )
            for attempt in get_app().jobs.attempts(stored.id)
            if attempt.error_type
        ]
        return self._result(task, stored, errors=errors)

    def _result(
        self, task: Task[Any, Any], job: Job, *, errors: list[TaskError] | None = None
    ) -> TaskResult[Any]:
        started: datetime | None = job.claimed_at
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=str(job.id),
            status=_STATUS[job.state],
            enqueued_at=job.created_at,
            started_at=started,
            finished_at=job.finished_at,
            last_attempted_at=started,
            args=list(job.payload.get("args", [])),
            kwargs=dict(job.payload.get("kwargs", {})),
            backend=self.alias,
            errors=errors or [],
            worker_ids=[job.claimed_by] * job.attempts if job.claimed_by else [],
        )
        if job.state is JobState.SUCCEEDED:  # what the task returned, as Django's backends set it
            object.__setattr__(result, "_return_value", job.result)
        return result


def run_task(ctx: JobContext, *, task: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The ``django.task`` handler: import the ``@task`` by its path and call it; returns
    what it returned, normalised as Django does, to be stored as the job's result."""
    try:
        found = import_string(task)
    except ImportError as exc:
        raise PermanentFailure(
            f"cannot import the task {task!r} ({exc}): deploy the code that defines it, "
            "then requeue the job"
        ) from exc
    if not isinstance(found, Task):
        raise PermanentFailure(f"{task!r} is not a @task function; nothing was run")
    if found.takes_context:
        backend = found.get_backend()
        if not isinstance(backend, TaskBackend):
            raise PermanentFailure(f"the task {task!r} is not set to run on mailfathom")
        result = backend._result(found, ctx.job)
        returned = found.call(TaskContext(task_result=result), *args, **kwargs)
    else:
        returned = found.call(*args, **kwargs)
    try:
        return normalize_json(returned)
    except (TypeError, ValueError) as exc:  # what Django's immediate backend fails on
        raise ResultError(
            f"the task {task!r} returned a {type(returned).__name__} that cannot be stored as "
            f"its result ({exc}): return JSON data (dicts, lists, strings, numbers, booleans "
            "or None); the task's work was done, so fix it before requeueing"
        ) from exc


def register_task_kind(app: MailFathom) -> None:
    """Register the ``django.task`` kind on ``app`` (done once, when the app is built)."""
    app.job(TASK_KIND)(with_django_connections(run_task))


# Every app built in this process has the kind (the app config imports this module at
# start, so a worker that never sends a task runs them all the same).
on_build(register_task_kind)

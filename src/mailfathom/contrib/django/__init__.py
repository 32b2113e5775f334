"""Django integration: ``INSTALLED_APPS += ["mailfathom.contrib.django"]`` (docs/django.md).

- ``EMAIL_BACKEND = "mailfathom.contrib.django.EmailBackend"``: Django's mail is
  recorded into the outbox in the caller's transaction;
- ``TASKS = {"default": {"BACKEND": "mailfathom.contrib.django.TaskBackend"}}``:
  ``@task`` functions run as mailfathom jobs;
- :func:`enqueue` and :func:`job`: jobs written in Django's transaction, handlers
  run with Django's connection handling;
- ``MailFathom(transport=DjangoBackendTransport("anymail.backends.postmark.EmailBackend"))``:
  deliver the outbox through any Django email backend (docs/providers.md);
- ``manage.py mailfathom worker|web|migrate|jobs|outbox …``: the ``mailfathom``
  command on the project's app.

The app is built from the ``MAILFATHOM`` setting on first use (:func:`get_app`).
``EmailBackend``, ``TaskBackend``, ``DjangoBackendTransport``, :func:`with_console` (the
console behind Django's staff login) and :func:`empty_tables` (for tests) are imported on
first access, so naming this package in ``INSTALLED_APPS`` imports nothing that needs
settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mailfathom.contrib.django.app import (
    close_app,
    config,
    django_connection,
    enqueue,
    get_app,
    job,
    with_django_connections,
)

if TYPE_CHECKING:
    from mailfathom.contrib.django.console import with_console
    from mailfathom.contrib.django.mail import EmailBackend
    from mailfathom.contrib.django.tasks import TaskBackend
    from mailfathom.contrib.django.testing import empty_tables
    from mailfathom.contrib.django.transport import DjangoBackendTransport

__all__ = [
    "DjangoBackendTransport",
    "EmailBackend",
    "TaskBackend",
    "close_app",
    "config",
    "django_connection",
    "empty_tables",
    "enqueue",
    "get_app",
    "job",
    "with_console",
    "with_django_connections",
]


def __getattr__(name: str) -> Any:
    """``EmailBackend`` and ``TaskBackend``, imported when Django first asks for them;
    ``with_console`` and ``empty_tables``, imported on first use (both need settings);
    ``DjangoBackendTransport``, imported on first use."""
    # here, not at the top: see the module docstring (INSTALLED_APPS imports this package)
    if name == "EmailBackend":
        from mailfathom.contrib.django.mail import EmailBackend

        return EmailBackend
    if name == "TaskBackend":
        from mailfathom.contrib.django.tasks import TaskBackend

        return TaskBackend
    if name == "DjangoBackendTransport":
        from mailfathom.contrib.django.transport import DjangoBackendTransport

        return DjangoBackendTransport
    if name == "with_console":
        from mailfathom.contrib.django.console import with_console

        return with_console
    if name == "empty_tables":
        from mailfathom.contrib.django.testing import empty_tables

        return empty_tables
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

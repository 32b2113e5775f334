"""The one ``MailFathom`` of a Django project, and writing in Django's transactions.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Built on first use from ``settings.MAILFATHOM`` (never on import), once per process.
``django_connection()`` is the raw driver connection Django holds for the alias
(``sqlite3.Connection`` or ``psycopg.Connection``): passed as ``connection=``, a job
or an email is written inside whatever ``transaction.atomic()`` block is open, and
commits or rolls back with it. Handlers registered with :func:`job` run like a
Django request: stale database connections are closed before and after each job.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import close_old_connections, connections

from mailfathom.app import MailFathom
from mailfathom.contrib.django.conf import DjangoConfig, database_url, load_config
from mailfathom.delivery.transport import Transport
from mailfathom.jobs.model import EnqueuedJob
from mailfathom.jobs.registry import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Isolation
from mailfathom.jobs.retry import Backoff

__all__ = [
    "close_app",
    "config",
    "django_connection",
    "enqueue",
    "get_app",
    "job",
    "on_build",
    "with_django_connections",
]

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_built: tuple[DjangoConfig, MailFathom] | None = None
#: What the alias's database URL was read from when the app was built: while it is
#: unchanged, so is the URL (and reading the URL again costs more than comparing).
_built_from: tuple[str, dict[str, Any]] | None = None
#: Every ``@job`` registration, replayed on a rebuilt app.
_handlers: list[tuple[str, Callable[..., Any], dict[str, Any]]] = []
#: What every app built here gets besides those (see :func:`on_build`).
_on_build: list[Callable[[MailFathom], None]] = []


def _build() -> tuple[DjangoConfig, MailFathom]:
    """The app, built on first use; rebuilt when the alias now names another database.

    Django's test runner switches each alias to its test database after start-up
    (after the ``jobs`` modules were imported): the app follows, with every ``@job``
    handler registered again, so tests write jobs and email into the test database.
    """
    global _built, _built_from  # noqa: PLW0603 - one app per process, built lazily
    with _lock:
        if _built is not None:
            conf, app = _built
            source = _url_source(conf.alias)
            if source == _built_from:
                return _built
            if app.settings.database_url == database_url(conf.alias):
                _built_from = source
                return _built
            app.close()
        conf = load_config()
        app = MailFathom(settings=conf.settings, transport=_transport(conf))
        for registration in _on_build:
            registration(app)
        for kind, handler, policy in _handlers:
            app.job(kind, **policy)(handler)
        _built = (conf, app)
        _built_from = _url_source(conf.alias)
        _close_before_test_database_teardown(conf.alias)
        return _built


def _url_source(alias: str) -> tuple[str, dict[str, Any]]:
    """What :func:`database_url` reads for ``alias``: the working directory (a relative
    SQLite NAME) and a copy of ``DATABASES[alias]`` as Django holds it now (the test
    runner changes its NAME in place), its ``OPTIONS`` copied too."""
    conf = dict(connections.settings[alias])
    conf["OPTIONS"] = dict(conf.get("OPTIONS") or {})
    return os.getcwd(), conf


def _transport(conf: DjangoConfig) -> Transport | None:
    """The Django email backend that delivers, when ``DELIVERY_BACKEND`` names one
    (imported only then: the package is imported by ``INSTALLED_APPS``)."""
    if conf.delivery_backend is None:
        return None
    # here, not at the top: the transport is built only when the setting names a backend
    from mailfathom.contrib.django.transport import DjangoBackendTransport

    return DjangoBackendTransport(
        conf.delivery_backend, **dict(conf.delivery_backend_options or {})
    )


def on_build(registration: Callable[[MailFathom], None]) -> None:
    """Call ``registration`` with the app if it is built, and with every app built from
    now on (a rebuilt one included): how a module above this one (the ``django.task``
    kind of :mod:`mailfathom.contrib.django.tasks`) adds to the app without this module
    importing it."""
    with _lock:
        _on_build.append(registration)
        if _built is not None:
            registration(_built[1])


def built_app() -> MailFathom | None:
    """The app as built so far, or None: unlike :func:`get_app`, never builds one."""
    return None if _built is None else _built[1]


def close_app() -> None:
    """Close the project's app and forget it: its database connections are released now,
    and the next use builds it again (with every ``@job`` handler).

    Called before Django's test runner drops a test database, which PostgreSQL refuses
    while any connection is open on it, and after ``manage.py migrate`` built the app
    only to migrate.
    """
    global _built  # noqa: PLW0603 - one app per process, built lazily
    with _lock:
        if _built is not None:
            _built[1].close()
            _built = None


def _close_before_test_database_teardown(alias: str) -> None:
    """Make the alias's ``destroy_test_db`` close the app first (once per creation object).

    Django's test runner drops each test database through
    ``connections[alias].creation.destroy_test_db``; mailfathom's pooled connections on
    it would make PostgreSQL refuse ("being accessed by other users"), leaving the test
    database behind and failing the run.
    """
    creation = connections[alias].creation
    if getattr(creation, "_mailfathom_closes_app", False):
        return
    destroy = creation.destroy_test_db

    @functools.wraps(destroy)
    def destroy_test_db(*args: Any, **kwargs: Any) -> Any:
        close_app()
        return destroy(*args, **kwargs)

    creation.destroy_test_db = destroy_test_db  # type: ignore[method-assign]
    creation._mailfathom_closes_app = True  # type: ignore[attr-defined]


def get_app() -> MailFathom:
    """The project's ``MailFathom``, on the database of ``MAILFATHOM["DATABASE"]``."""
    return _build()[1]


def config() -> DjangoConfig:
    """The validated ``MAILFATHOM`` setting (alias, mailfathom settings, console URL)."""
    return _build()[0]


def django_connection(using: str | None = None) -> object:
    """The raw connection Django holds for ``using`` (default: mailfathom's alias).

    Opened if needed; refused (``TransactionManagementError``) inside an ``atomic()``
    block that already failed, as Django refuses any query there.
    """
    wrapper = connections[using or config().alias]
    wrapper.ensure_connection()
    wrapper.validate_no_broken_transaction()
    return wrapper.connection


def enqueue(
    kind: str,
    payload: Mapping[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    delay: timedelta | float | None = None,
    run_at: datetime | None = None,
    priority: int = 0,
    queue: str | None = None,
    hold: bool = False,
    max_attempts: int | None = None,
) -> EnqueuedJob:
    """``mf.enqueue`` on Django's connection: inside ``atomic()`` the job commits or rolls
    back with the block; outside one it is committed at once (Django's autocommit)."""
    return get_app().enqueue(
        kind,
        payload,
        idempotency_key=idempotency_key,
        delay=delay,
        run_at=run_at,
        priority=priority,
        queue=queue,
        hold=hold,
        max_attempts=max_attempts,
        connection=django_connection(),
    )


def with_django_connections(handler: F) -> F:
    """``handler`` wrapped so that Django's stale connections are closed before and after
    it, as Django does around each request (``CONN_MAX_AGE``, broken connections).

    ``async def`` handlers are returned as they are: Django's ORM is reached from them
    through ``sync_to_async``, which manages its own connections.
    """
    if inspect.iscoroutinefunction(handler):
        return handler

    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return handler(*args, **kwargs)
        finally:
            close_old_connections()

    return run  # type: ignore[return-value]


def job(
    kind: str,
    *,
    queue: str = DEFAULT_QUEUE,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout: float | timedelta | None = None,
    backoff: Backoff | None = None,
    permanent: tuple[type[BaseException], ...] = (),
    isolation: Isolation = "thread",
) -> Callable[[F], F]:
    """``@mf.job`` on the project's app, with Django's connections handled around each job.

    A handler with ``isolation="process"`` runs in a fresh child process where Django
    is not set up: it must call ``django.setup()`` itself before using the ORM.
    """

    policy: dict[str, Any] = {
        "queue": queue,
        "max_attempts": max_attempts,
        "timeout": timeout,
        "backoff": backoff,
        "permanent": permanent,
        "isolation": isolation,
    }

    def register(handler: F) -> F:
        wrapped = handler if isolation == "process" else with_django_connections(handler)
        get_app().job(kind, **policy)(wrapped)  # refused (a clear error) if invalid or twice
        _handlers.append((kind, wrapped, policy))
        return handler

    return register

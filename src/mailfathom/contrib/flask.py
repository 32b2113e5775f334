"""Flask: ``MailFathomFlask(app)``, jobs inside an application context, ``flask mailfathom``.

::

    from flask import Flask
    from mailfathom.contrib.flask import MailFathomFlask

    app = Flask(__name__)
    app.config["MAILFATHOM_DATABASE_URL"] = "sqlite:///app.db"
    mailfathom = MailFathomFlask(app)          # or MailFathomFlask() + init_app(app)

    @mailfathom.job("accounts.welcome")
    def welcome(ctx, user_id):                 # current_app, g and extensions work here
        ...

Then ``flask mailfathom migrate`` and ``flask mailfathom worker``: ``flask mailfathom``
is the ``mailfathom`` command line itself (every subcommand, the same options and
log lines) on the extension's app. Every job the extension's worker runs
(``flask mailfathom worker``, :meth:`MailFathomFlask.worker`)
runs inside ``app.app_context()``, a fresh one per job, as a request gets one:
kinds registered with :meth:`MailFathomFlask.job` everywhere (any worker that
imports the app), and those registered on ``mf.job`` directly when this
extension's worker runs them (except ``isolation="process"`` ones, which must use
:meth:`MailFathomFlask.job`).

Configuration (``app.config``), used when no ``mf=`` is given:
``MAILFATHOM_DATABASE_URL`` and ``MAILFATHOM_SMTP_URL`` (each falls back to the
environment, then ``mailfathom.toml``, then the default, as :class:`MailFathom` does).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from flask import Flask, current_app
from flask.cli import ScriptInfo, with_appcontext

from mailfathom.app import MailFathom
from mailfathom.cli import run
from mailfathom.errors import ConfigurationError
from mailfathom.jobs import signals
from mailfathom.jobs.registry import Handler
from mailfathom.jobs.worker.worker import Worker

__all__ = ["MailFathomFlask", "cli"]

F = TypeVar("F", bound=Callable[..., Any])
_EXTENSION = "mailfathom"
_WRAPPED = "__mailfathom_flask_app__"


class MailFathomFlask:
    """The Flask extension: one :class:`MailFathom` (``.mf``) beside one Flask app.

    ``MailFathomFlask(app)``, or ``MailFathomFlask(mf=mf)`` then ``init_app(app)`` in an
    application factory. Without ``mf`` it is built by :meth:`init_app` from the
    app's config, so register jobs at import time only when ``mf`` is given.
    """

    def __init__(self, app: Flask | None = None, *, mf: MailFathom | None = None) -> None:
        self._mf = mf
        self._app: Flask | None = None
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Attach to ``app``: ``app.extensions["mailfathom"]``, and ``flask mailfathom``."""
        if self._app is not None and self._app is not app:
            raise ConfigurationError(
                "this MailFathomFlask is already attached to another Flask app: make one "
                "extension per app (its jobs run in that app's context)"
            )
        if self._mf is None:
            self._mf = MailFathom(
                app.config.get("MAILFATHOM_DATABASE_URL"),
                smtp_url=app.config.get("MAILFATHOM_SMTP_URL"),
            )
        self._app = app
        app.extensions[_EXTENSION] = self
        app.cli.add_command(cli)

    @property
    def mf(self) -> MailFathom:
        """The :class:`MailFathom` this extension drives."""
        if self._mf is None:
            raise ConfigurationError(
                "MailFathomFlask has no MailFathom yet: call init_app(app) first, or pass "
                "mf=MailFathom(...) when you create the extension"
            )
        return self._mf

    @property
    def app(self) -> Flask:
        """The Flask app whose context jobs run in."""
        if self._app is None:
            raise ConfigurationError(
                "MailFathomFlask is not attached to a Flask app: call init_app(app) first"
            )
        return self._app

    def job(self, kind: str, **options: Any) -> Callable[[F], F]:
        """``mf.job(kind, **options)``, the handler running inside the app's context.

        Returns the wrapped handler (calling it directly also pushes a context), so
        an ``isolation="process"`` kind pickles and runs it as it is.
        """

        def register(handler: F) -> F:
            wrapped = self._in_context(handler)
            self.mf.job(kind, **options)(wrapped)
            return wrapped  # type: ignore[return-value]

        return register

    def worker(
        self,
        concurrency: int | None = None,
        queues: Sequence[str] | None = None,
        **options: Any,
    ) -> Worker:
        """``mf.worker(...)`` after every thread-run kind of ``mf`` was set to run in the
        app's context (those registered with :meth:`job` already do)."""
        self.run_kinds_in_context()
        return self.mf.worker(concurrency, queues, **options)

    def run_kinds_in_context(self) -> None:
        """Make every thread-run kind registered on ``mf`` so far run in the app's context
        (idempotent), so any worker of ``mf`` runs them as this extension's would."""
        registry = self.mf.registry
        for name in registry.names():
            kind = registry.get(name)
            if kind is None or kind.isolation != "thread" or hasattr(kind.handler, _WRAPPED):
                continue
            registry.replace(dataclasses.replace(kind, handler=self._in_context(kind.handler)))

    def _in_context(self, handler: Handler) -> Handler:
        if hasattr(handler, _WRAPPED):
            return handler
        ext = self
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with ext.app.app_context():
                    return await handler(*args, **kwargs)

            setattr(run_async, _WRAPPED, True)
            return run_async

        @functools.wraps(handler)
        def run(*args: Any, **kwargs: Any) -> Any:
            with ext.app.app_context():
                return handler(*args, **kwargs)

        setattr(run, _WRAPPED, True)
        return run


def _extension() -> MailFathomFlask:
    found = current_app.extensions.get(_EXTENSION)
    if not isinstance(found, MailFathomFlask):
        raise click.UsageError(
            "this Flask app has no MailFathomFlask extension: create one with "
            "MailFathomFlask(app) (or init_app(app)) in the app factory"
        )
    return found


def _worker_command(ctx: click.Context) -> list[str]:
    """How ``worker --processes N`` starts each worker process: this same Flask app's
    ``flask mailfathom worker`` (``--app`` as given here, else Flask finds it again from
    ``FLASK_APP`` or the current folder, as it did for this command)."""
    info = ctx.find_object(ScriptInfo)
    path = info.app_import_path if info is not None else None
    where = ["--app", path] if path else []
    return [sys.executable, "-m", "flask", *where, "mailfathom", "worker"]


#: ``flask mailfathom ...``: added to the app's CLI by :meth:`MailFathomFlask.init_app`.
@click.command(
    "mailfathom",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@with_appcontext
@click.pass_context
def cli(ctx: click.Context, args: tuple[str, ...]) -> None:
    """mailfathom's command line on this Flask app: worker, migrate, jobs, outbox, queues,
    schedules, workers, enqueue, web, health, prune, backup, limits, dev (flask mailfathom
    --help)."""
    ext = _extension()
    ext.run_kinds_in_context()
    worker = args[:1] == ("worker",)
    if worker:  # a stop that comes while the worker starts is honoured, as by the CLI
        signals.hold()
    prog = f"{ctx.find_root().info_name or 'flask'} mailfathom"
    try:
        code = run(
            list(args), prog_name=prog, obj={"app": ext.mf, "worker_command": _worker_command(ctx)}
        )
    finally:
        if worker:
            signals.release()  # the handlers found before, for a process that goes on
    ctx.exit(code)

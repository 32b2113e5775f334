"""What every ``mailfathom`` command shares: opening the app, errors, tables and ``--json``.

Internal. Commands get the app from :func:`open_app` (from ``--app module:attr``,
the ``--database`` URL, or the app a framework integration presets:
:func:`preset_app`), print tables for people with rich and plain JSON for
scripts, and turn every :class:`~mailfathom.errors.MailFathomError` into a
one-line message and exit status 2.
"""

from __future__ import annotations

import getpass
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click
from rich.console import Console as RichConsole

from mailfathom.app import MailFathom
from mailfathom.config import Settings
from mailfathom.errors import MailFathomError

__all__ = [
    "OperatorError",
    "app_option",
    "default_actor",
    "echo_json",
    "load_app",
    "open_app",
    "preset_app",
    "refuse_with_preset",
    "reports_errors",
    "rich_out",
]

F = TypeVar("F", bound=Callable[..., Any])


class OperatorError(click.ClickException):
    """A mailfathom error shown to the operator: its message, then exit status 2."""

    exit_code = 2


def reports_errors(command: F) -> F:
    """Turn :class:`MailFathomError` raised by ``command`` into :class:`OperatorError`."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MailFathomError as exc:
            raise OperatorError(str(exc)) from exc

    return run  # type: ignore[return-value]


def app_option(command: F) -> F:
    """The ``--app module:attr`` option: the app whose job kinds (handlers) to use."""
    return click.option(
        "--app",
        "app_spec",
        envvar="MAILFATHOM_APP",
        default=None,
        metavar="MODULE:ATTR",
        help="Your MailFathom app (e.g. myproject.tasks:mf): its job kinds and their handlers.",
    )(command)


def preset_app(ctx: click.Context) -> Any:
    """The ``MailFathom`` a framework integration handed in as ``obj={"app": mf}``, or None.

    ``manage.py mailfathom …`` (``mailfathom.contrib.django``) runs this command group
    with the app it built from the framework's settings; ``--app`` and ``--database``
    are then refused, since the app and its database are already chosen.
    """
    obj = ctx.find_root().obj
    return obj.get("app") if isinstance(obj, dict) else None


def refuse_with_preset(ctx: click.Context) -> None:
    """A clear error when ``--app`` or ``--database`` is given on the command line beside a
    preset app (``MAILFATHOM_APP`` / ``MAILFATHOM_DATABASE_URL`` in the environment are
    simply not used then)."""
    for context in (ctx.find_root(), ctx):
        for name in ("database", "app_spec", "app_path"):
            if (
                name in context.params
                and context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
            ):
                raise click.UsageError(
                    "--app and --database do not apply here: the app and its database come "
                    "from your framework's settings (for Django, MAILFATHOM and DATABASES)"
                )


@contextmanager
def open_app(ctx: click.Context, app_spec: str | None = None) -> Iterator[Any]:
    """The app for this command: ``--app`` when given, else one on the ``--database`` URL.

    ``--app`` is imported by the same loader as ``mailfathom worker`` (``--database``
    reaches the app through ``MAILFATHOM_DATABASE_URL``); its errors exit with status 2.
    """
    root = ctx.find_root()
    database = root.params.get("database")
    preset = preset_app(ctx)
    if preset is not None:  # owned (and closed) by the integration that made it
        refuse_with_preset(ctx)
        yield preset
        return
    if app_spec:
        explicit = root.get_parameter_source("database") is click.core.ParameterSource.COMMANDLINE
        try:
            app = load_app(app_spec, database if explicit else None)
        except click.ClickException as exc:
            raise OperatorError(exc.format_message()) from exc
        try:
            yield app
        finally:
            app.close()
        return
    with MailFathom(settings=Settings.load({"database_url": database})) as app:
        yield app


def load_app(path: str, database: str | None = None) -> MailFathom:
    """Import ``module:attr`` and return that ``MailFathom``; a clear error otherwise."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise click.BadParameter(
            f"{path!r} is not MODULE:ATTR; write e.g. examples.app:mf", param_hint="--app"
        )
    if database is not None:
        os.environ["MAILFATHOM_DATABASE_URL"] = database
    folder = os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise click.ClickException(
                f"importing {module_name!r} failed: {exc} (a module it imports is missing)"
            ) from exc
        raise click.ClickException(
            f"cannot import {module_name!r}: no such module in {folder} or on the Python path; "
            "run from the folder that contains it, or install it"
        ) from exc
    except MailFathomError:
        raise
    except Exception as exc:
        raise click.ClickException(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: object = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise click.ClickException(
                f"module {module_name!r} has no attribute {attr!r}: point --app at your "
                "MailFathom object, e.g. examples.app:mf"
            )
        target = getattr(target, part)
    if not isinstance(target, MailFathom):
        raise click.ClickException(
            f"{path} is a {type(target).__name__}, not a MailFathom object: point --app at the "
            "object your code builds with MailFathom(...)"
        )
    if database is not None and target.settings.database_url != database:
        raise click.ClickException(
            f"{path} uses the database {target.settings.database_url!r}, not the --database "
            "given: build it with MailFathom() (which reads MAILFATHOM_DATABASE_URL) or drop "
            "--database"
        )
    return target


def default_actor() -> str:
    """Who acts, for the audit trail: ``cli:<login name>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = str(os.getuid())
    return f"cli:{user}"


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON, for scripts."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def rich_out() -> RichConsole:
    """A rich console on the current standard output (wide enough for tables in pipes)."""
    width = None if sys.stdout.isatty() else 160
    return RichConsole(width=width, highlight=False, soft_wrap=False)

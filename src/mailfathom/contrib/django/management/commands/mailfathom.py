"""``manage.py mailfathom …``: the ``mailfathom`` command line on the project's app.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Every subcommand of ``mailfathom`` (``worker``, ``web``, ``migrate``, ``jobs``,
``outbox``, ``schedules``, ``workers``, ``enqueue``) runs on the app built from
``settings.MAILFATHOM``, so no ``--app`` or ``--database`` is given: the database
is the ``DATABASES`` alias, the handlers are the project's ``jobs`` modules and
``@task`` functions. ``manage.py mailfathom --help`` lists them.

``manage.py mailfathom worker --processes N`` starts each of its N worker
processes as this same ``manage.py mailfathom worker`` (the project's settings,
``DATABASES`` and handlers), never as the bare ``mailfathom worker``, which knows
none of them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from mailfathom.cli import run
from mailfathom.contrib.django.app import get_app
from mailfathom.jobs import signals

__all__ = ["Command"]


class Command(BaseCommand):
    """Hands its arguments to mailfathom's own (click) command line, with the project's app."""

    help = (
        "mailfathom's command line on this project's app: worker, web, migrate, jobs, outbox, "
        "schedules, workers, enqueue (manage.py mailfathom --help)"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """One catch-all argument: everything after ``mailfathom`` goes to mailfathom."""
        parser.add_argument("args", nargs=argparse.REMAINDER, help="a mailfathom command")

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py mailfathom ARGS``: bypass Django's parser, so ``--help`` and every
        option reach mailfathom's."""
        command = [*_program(argv[0]), argv[1], "worker"]
        code = self._run(argv[2:], f"{os.path.basename(argv[0])} {argv[1]}", command)
        if code:
            sys.exit(code)

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("mailfathom", "worker", "--burst")``; with ``--processes N``
        the worker processes are ``python -m django mailfathom worker`` on this
        process's ``DJANGO_SETTINGS_MODULE``."""
        command = None
        if os.environ.get("DJANGO_SETTINGS_MODULE"):
            command = [sys.executable, "-m", "django", "mailfathom", "worker"]
        code = self._run([str(arg) for arg in args], "mailfathom", command)
        if code:
            raise CommandError(f"mailfathom {' '.join(args)} exited with status {code}")

    def _run(self, args: list[str], prog_name: str, worker_command: list[str] | None) -> int:
        worker = args[:1] == ["worker"]
        if worker:  # a stop that comes while the worker starts is honoured, as by the CLI
            signals.hold()
        obj: dict[str, Any] = {"app": get_app()}
        if worker_command is not None:
            obj["worker_command"] = worker_command
        try:
            return run(args, prog_name=prog_name, obj=obj)
        finally:
            if worker:
                signals.release()  # the handlers found before, for a process that goes on
            connections.close_all()


def _program(argv0: str) -> list[str]:
    """How to start this same program again (``argv[0]``: ``manage.py``,
    ``django-admin`` or Django's ``__main__.py`` under ``python -m django``), from any
    folder, with this interpreter."""
    if os.path.basename(argv0) == "__main__.py":
        return [sys.executable, "-m", "django"]
    found = argv0 if os.sep in argv0 else shutil.which(argv0) or argv0
    return [sys.executable, os.path.abspath(found)]

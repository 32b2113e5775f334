"""``manage.py mailfathom …``: the ``mailfathom`` command line on the project's app.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Every subcommand of ``mailfathom`` (``worker``, ``web``, ``migrate``, ``jobs``,
``outbox``, ``schedules``, ``workers``, ``enqueue``) runs on the app built from
``settings.MAILFATHOM``, so no ``--app`` or ``--database`` is given: the database
is the ``DATABASES`` alias, the handlers are the project's ``jobs`` modules and
``@task`` functions. ``manage.py mailfathom --help`` lists them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from mailfathom.cli import run
from mailfathom.contrib.django.app import get_app

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
        code = self._run(argv[2:], f"{os.path.basename(argv[0])} {argv[1]}")
        if code:
            sys.exit(code)

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("mailfathom", "worker", "--burst")``."""
        code = self._run([str(arg) for arg in args], "mailfathom")
        if code:
            raise CommandError(f"mailfathom {' '.join(args)} exited with status {code}")

    def _run(self, args: list[str], prog_name: str) -> int:
        try:
            return run(args, prog_name=prog_name, obj={"app": get_app()})
        finally:
            connections.close_all()

"""The ``mailfathom`` command: one group, one module per command (group) registered here.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import copy
import functools
import io
import sys
from typing import Any

import click

from mailfathom.cli.backup_command import backup
from mailfathom.cli.common import open_app, reports_errors
from mailfathom.cli.dev_command import dev
from mailfathom.cli.health_command import health
from mailfathom.cli.jobs_command import enqueue, jobs
from mailfathom.cli.limits_command import limits
from mailfathom.cli.outbox_command import outbox
from mailfathom.cli.prune_command import prune
from mailfathom.cli.queues_command import queues
from mailfathom.cli.schedules_command import schedules, workers
from mailfathom.cli.suppressions_command import suppressions
from mailfathom.cli.web_command import web
from mailfathom.cli.worker_command import worker
from mailfathom.errors import MailFathomError
from mailfathom.jobs import signals
from mailfathom.redact import guard_logs, redact

__all__ = ["cli", "main", "run"]


@click.group()
@click.option(
    "--database",
    envvar="MAILFATHOM_DATABASE_URL",
    default=None,
    help="Database URL (default sqlite:///mailfathom.db).",
)
@click.pass_context
def cli(ctx: click.Context, database: str | None) -> None:
    """mailfathom: durable jobs and crash-safe outgoing email."""
    ctx.ensure_object(dict)["database"] = database  # obj may carry a preset app (preset_app)
    if ctx.invoked_subcommand != "worker":
        signals.release()  # only a worker stops gracefully on SIGTERM/SIGINT


@cli.command()
@click.pass_context
@reports_errors
def migrate(ctx: click.Context) -> None:
    """Create or upgrade the database schema (idempotent)."""
    with open_app(ctx) as mf:
        applied = mf.migrate()
    click.echo(
        f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
    )


cli.add_command(backup)
cli.add_command(enqueue)
cli.add_command(jobs)
cli.add_command(limits)
cli.add_command(outbox)
cli.add_command(prune)
cli.add_command(queues)
cli.add_command(schedules)
cli.add_command(suppressions)
cli.add_command(workers)
cli.add_command(web)
cli.add_command(dev)
cli.add_command(worker)
cli.add_command(health)


def run(
    args: list[str] | None = None,
    *,
    prog_name: str | None = None,
    obj: dict[str, Any] | None = None,
) -> int:
    """Run the command line ``args`` and return the exit status; our errors print one line
    and give status 2. ``obj={"app": mf}`` presets the app (framework integrations)."""
    guard_logs()  # a driver's connection warnings may quote a password
    group = cli if obj is None or obj.get("app") is None else _preset_cli()
    try:
        code = group.main(args=args, prog_name=prog_name, obj=obj, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted: nothing changed", err=True)
        return 1
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        click.echo(redact(shown.getvalue()), err=True, nl=False)  # it may quote a database URL
        return exc.exit_code
    except MailFathomError as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    return code if isinstance(code, int) else 0


#: The options that choose the app or its database, which a preset app has chosen already.
_APP_OPTIONS = frozenset({"database", "app_spec", "app_path"})


@functools.cache
def _preset_cli() -> click.Group:
    """The command group as a framework integration runs it (``obj={"app": mf}``): a copy
    whose ``--help`` shows no ``--app`` or ``--database``, since the app and its database
    come from the framework's settings (given anyway, they are refused with that reason)."""
    group = copy.deepcopy(cli)
    commands: list[click.Command] = [group]
    while commands:
        command = commands.pop()
        for param in command.params:
            if isinstance(param, click.Option) and param.name in _APP_OPTIONS:
                param.hidden = True
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
    return group


def main() -> None:
    """Entry point: run the command, turning our errors into a message and exit status 2.

    SIGTERM and SIGINT are held from here on (:func:`mailfathom.jobs.signals.hold`): a
    worker stopped while it starts exits cleanly; any other command gets them back
    as soon as its name is read."""
    signals.hold()
    sys.exit(run())

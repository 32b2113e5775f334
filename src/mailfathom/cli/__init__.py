"""The ``mailfathom`` command: one group, one module per command (group) registered here."""

from __future__ import annotations

import sys

import click

from mailfathom.cli.common import reports_errors
from mailfathom.cli.dev_command import dev
from mailfathom.cli.jobs_command import enqueue, jobs
from mailfathom.cli.outbox_command import outbox
from mailfathom.cli.prune_command import prune
from mailfathom.cli.schedules_command import schedules, workers
from mailfathom.cli.web_command import web
from mailfathom.cli.worker_command import worker
from mailfathom.config import Settings
from mailfathom.errors import MailFathomError

__all__ = ["cli", "main"]


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
    ctx.obj = {"database": database}


@cli.command()
@click.pass_context
@reports_errors
def migrate(ctx: click.Context) -> None:
    """Create or upgrade the database schema (idempotent)."""
    from mailfathom.app import MailFathom

    with MailFathom(settings=Settings.load({"database_url": ctx.obj["database"]})) as mf:
        applied = mf.migrate()
    click.echo(
        f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
    )


cli.add_command(enqueue)
cli.add_command(jobs)
cli.add_command(outbox)
cli.add_command(prune)
cli.add_command(schedules)
cli.add_command(workers)
cli.add_command(web)
cli.add_command(dev)
cli.add_command(worker)


def main() -> None:
    """Entry point: run the command, turning our errors into a message and exit status 2."""
    try:
        code = cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted: nothing changed", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except MailFathomError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)

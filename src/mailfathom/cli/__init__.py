"""The ``mailfathom`` command."""

from __future__ import annotations

import sys

import click

from mailfathom.config import Settings
from mailfathom.errors import MailFathomError

__all__ = ["main"]


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
def migrate(ctx: click.Context) -> None:
    """Create or upgrade the database schema (idempotent)."""
    from mailfathom.app import MailFathom

    with MailFathom(settings=Settings.load({"database_url": ctx.obj["database"]})) as mf:
        applied = mf.migrate()
    click.echo(
        f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
    )


from mailfathom.cli.worker_command import worker as _worker  # noqa: E402

cli.add_command(_worker)


def main() -> None:
    """Entry point: run the command, turning our errors into a message and exit status 2."""
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except MailFathomError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)

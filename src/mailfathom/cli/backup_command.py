"""``mailfathom backup PATH``: a consistent copy of the SQLite database, taken while it runs.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

PostgreSQL databases are backed up with ``pg_dump``; the command says how.
docs/operations.md ("Backup and restore") has the restore procedure.
"""

from __future__ import annotations

import click

from mailfathom.cli.common import open_app, reports_errors

__all__ = ["backup"]


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, writable=False, resolve_path=True))
@click.pass_context
@reports_errors
def backup(ctx: click.Context, path: str) -> None:
    """Copy the SQLite database to the new file PATH (0600), consistent as of one moment,
    while workers go on writing. For PostgreSQL, use pg_dump."""
    with open_app(ctx) as mf:
        mf.store.backup(path)
    click.echo(f"backed up to {path}")

"""``mailfathom prune``: one retention pass now, with a progress bar (``--dry-run``: count only).

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mailfathom.cli.common import app_option, echo_json, open_app, reports_errors, rich_out
from mailfathom.jobs.pruner import PruneReport

__all__ = ["prune"]


@click.command()
@click.option("--dry-run", is_flag=True, help="Only count what a pass would do; change nothing.")
@click.option(
    "--vacuum",
    is_flag=True,
    help="SQLite: afterwards switch the file to incremental auto-vacuum and rewrite it "
    "(VACUUM; once, for files made before retention existed; blocks writers meanwhile).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@app_option
@click.pass_context
@reports_errors
def prune(
    ctx: click.Context,
    /,
    *,
    dry_run: bool,
    vacuum: bool,
    as_json: bool,
    quiet: bool,
    app_spec: str | None,
) -> None:
    """Compact (or, where opted in, delete) terminal rows past their retention period.

    Workers do this on their own every ``prune_interval``; this runs one pass now.
    Per-kind ``@mf.job(retention=...)`` rules apply when the command knows your app.
    """
    with open_app(ctx, app_spec) as mf:
        planned = mf.prune(dry_run=True)
        if dry_run:
            report = planned
        else:
            progress = Progress(
                TextColumn("pruning"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=rich_out().__class__(stderr=True),
                disable=quiet or as_json,
                transient=False,
            )
            with progress:
                task = progress.add_task("pruning", total=planned.total)
                report = mf.prune(
                    progress=lambda table, state, action, n: progress.advance(task, n)
                )
            if vacuum:
                vacuum_file = getattr(mf.store.db, "vacuum", None)
                if vacuum_file is not None:
                    vacuum_file()
    if as_json:
        echo_json(report.to_json())
        return
    _print(report)


def _print(report: PruneReport) -> None:
    if not report.ran:
        click.echo("another pruner holds the lease (a worker is pruning): nothing done")
        return
    verb = "would prune" if report.dry_run else "pruned"
    table = Table("table", "state", "action", "rows")
    for table_name, states in report.rows.items():
        for state, actions in states.items():
            for action, n in actions.items():
                table.add_row(table_name, state, action, f"{n:,}")
    rich_out().print(table)
    extra = f"; {report.pages_reclaimed:,} page(s) reclaimed" if report.pages_reclaimed else ""
    click.echo(f"{verb} {report.total:,} row(s){extra}")

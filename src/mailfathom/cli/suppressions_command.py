"""``mailfathom suppressions list|add|lift|ingest-dsn``: the addresses never sent to again.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from mailfathom.cli.common import (
    OperatorError,
    default_actor,
    echo_json,
    open_app,
    reports_errors,
    rich_out,
)
from mailfathom.console.serialize import suppression_json
from mailfathom.delivery.dsn import parse_dsn
from mailfathom.delivery.suppressions import SUPPRESSION_REASONS
from mailfathom.errors import InvalidInput

__all__ = ["suppressions"]


@click.group()
def suppressions() -> None:
    """List, add and lift suppressed addresses (deliveries never send to them)."""


@suppressions.command("list")
@click.option("--search", default=None, help="Only addresses containing this text.")
@click.option("--limit", default=100, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def list_suppressions(
    ctx: click.Context, /, *, search: str | None, limit: int, as_json: bool
) -> None:
    """Suppressed addresses by address: why, from where, since when."""
    with open_app(ctx) as mf:
        found = mf.suppressions.list(search=search, limit=limit)
    if as_json:
        echo_json([suppression_json(e) for e in found])
        return
    if not found:
        click.echo("no address is suppressed" + (f" matching {search!r}" if search else ""))
        return
    table = Table("address", "reason", "source", "since", "by")
    for e in found:
        table.add_row(
            escape(e.address),
            e.reason,
            escape(e.source),
            f"{e.created_at:%Y-%m-%d %H:%M:%S}",
            escape(e.actor),
        )
    rich_out().print(table)


@suppressions.command("add")
@click.argument("address")
@click.option(
    "--reason",
    type=click.Choice(SUPPRESSION_REASONS),
    default="manual",
    show_default=True,
    help="Why the address is suppressed.",
)
@click.option("--source", default="operator", show_default=True, help="Where that came from.")
@click.option("--detail", default=None, help="The evidence (kept in the audit trail).")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def add_suppression(
    ctx: click.Context,
    /,
    *,
    address: str,
    reason: str,
    source: str,
    detail: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Never send to ADDRESS again (an address already suppressed keeps its entry)."""
    with open_app(ctx) as mf:
        entry = mf.suppressions.add(
            address, actor=actor or default_actor(), reason=reason, source=source, detail=detail
        )
    if as_json:
        echo_json(suppression_json(entry))
        return
    click.echo(f"{entry.address} is suppressed ({entry.reason}, {entry.source})")


@suppressions.command("lift")
@click.argument("address")
@click.option("--reason", default=None, help="Why (kept in the audit trail).")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def lift_suppression(
    ctx: click.Context, /, *, address: str, reason: str | None, actor: str | None
) -> None:
    """Send to ADDRESS again: take it off the suppression list."""
    with open_app(ctx) as mf:
        entry = mf.suppressions.lift(address, actor=actor or default_actor(), reason=reason)
    click.echo(f"{entry.address} is no longer suppressed (was: {entry.reason})")


@suppressions.command("ingest-dsn")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def ingest_dsn(ctx: click.Context, /, *, files: tuple[str, ...], actor: str | None) -> None:
    """Read bounce messages (RFC 3464 DSNs, one per file, e.g. a Maildir's) and
    suppress every recipient that bounced hard; soft bounces are only reported."""
    messages = []
    for path in files:  # every file is read and checked before anything is written
        with open(path, "rb") as file:
            data = file.read()
        try:
            parse_dsn(data)
        except InvalidInput as exc:
            raise OperatorError(f"{path}: {exc}") from exc
        messages.append((path, data))
    with open_app(ctx) as mf:
        for path, data in messages:
            report = mf.suppressions.ingest_dsn(data, actor=actor or default_actor())
            for r in report.hard:
                click.echo(f"{path}: {r.address} bounced hard ({r.status}): suppressed")
            for r in report.soft:
                click.echo(f"{path}: {r.address} bounced soft ({r.status}): not suppressed")

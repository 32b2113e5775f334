"""``mailfathom limits [NAME]``: each flow-control limit, its use now, its busiest keys and

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
the jobs waiting on it (what the console's Limits page and ``GET /api/limits`` show)."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from mailfathom.cli.common import echo_json, open_app, reports_errors, rich_out
from mailfathom.console import Console
from mailfathom.console.limits import KEYS_MOST, KEYS_SHOWN, rate_text

__all__ = ["limits"]


def _most(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _state(blocked: bool) -> str:
    return "[yellow]blocked[/]" if blocked else "room"


def _print(limit: dict[str, Any]) -> None:
    out = rich_out()
    title = f"{escape(limit['name'])}" + (" [yellow]blocked[/]" if limit["blocked"] else "")
    table = Table("", "max running", "rate", "running", "starts in window", "state", title=title)
    table.add_row(
        f"whole {limit['scope']}",
        _most(limit["max_running"]),
        rate_text(limit["rate"]),
        f"{limit['running']:,}",
        f"{limit['starts_in_window']:,}",
        _state(limit["blocked"]),
    )
    if limit["max_running_per_key"] is not None or limit["rate_per_key"] is not None:
        table.add_row(
            "each key", _most(limit["max_running_per_key"]), rate_text(limit["rate_per_key"])
        )
    for row in limit["keys"]:
        table.add_row(
            f"key {escape(row['key'])}",
            _most(row["max_running"]),
            rate_text(row["rate"]),
            f"{row['running']:,}",
            f"{row['starts_in_window']:,}",
            _state(row["blocked"]),
        )
    out.print(table)
    shown = len(limit["keys"])
    if limit["keys_total"] > shown:
        out.print(
            f"  {limit['keys_total']:,} keys ({limit['keys_blocked']:,} blocked); the {shown} "
            "shown are blocked first, then the busiest (--keys for more)"
        )
    waiting = limit["waiting"]
    if waiting:
        more = "+" if limit["waiting_more"] else ""
        ids = ", ".join(str(job_id) for job_id in waiting[:20])
        out.print(
            f"  waiting on it ({len(waiting)}{more}): {ids}{' …' if len(waiting) > 20 else ''}"
        )


@click.command()
@click.argument("name", required=False)
@click.option(
    "--keys",
    type=click.IntRange(1, KEYS_MOST),
    default=KEYS_SHOWN,
    show_default=True,
    help="Keys shown per limit (blocked first, then the busiest).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as GET /api/limits).")
@click.pass_context
@reports_errors
def limits(ctx: click.Context, /, *, name: str | None, keys: int, as_json: bool) -> None:
    """Each flow-control limit (or the one NAME, e.g. kind:sync.account): its values, its
    use now, its keys and the jobs waiting on it."""
    with open_app(ctx) as mf:
        console = Console(mf)
        found = [console.limit(name, keys=keys)] if name else console.limits(keys=keys)
    if as_json:
        echo_json(found[0] if name else found)
        return
    if not found:
        click.echo("no limit is stored: every kind and queue runs as fast as workers take it")
        return
    for limit in found:
        _print(limit)

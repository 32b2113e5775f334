"""``mailfathom queues list|pause|resume``: queues paused fleet-wide, and their backlog.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from mailfathom.cli.common import default_actor, echo_json, open_app, reports_errors, rich_out
from mailfathom.console import BulkResult, Console
from mailfathom.console.serialize import queue_bulk_json, queue_json

__all__ = ["queues"]


@click.group()
def queues() -> None:
    """List, pause and resume queues (a paused queue is claimed by no worker)."""


@queues.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def list_queues(ctx: click.Context, /, *, as_json: bool) -> None:
    """Every queue with unfinished jobs or a pause: due, held, running, paused by whom."""
    with open_app(ctx) as mf:
        found = Console(mf).queues()
    if as_json:
        echo_json([queue_json(q) for q in found])
        return
    if not found:
        click.echo("no queue has unfinished jobs, and none is paused")
        return
    table = Table("queue", "pending", "held", "running", "state")
    for q in found:
        pause = q.paused
        state = "active"
        if pause is not None:
            why = f": {escape(pause.reason)}" if pause.reason else ""
            state = f"[yellow]paused[/] by {escape(pause.actor)} at {pause.paused_at:%H:%M:%S}{why}"
        table.add_row(escape(q.queue), f"{q.pending:,}", f"{q.held:,}", f"{q.running:,}", state)
    rich_out().print(table)


def _queue_command(action: str, summary: str) -> None:
    @queues.command(action, help=summary)
    @click.argument("names", nargs=-1, required=True)
    @click.option("--reason", default=None, help="Why (kept in the audit trail).")
    @click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.pass_context
    @reports_errors
    def command(
        ctx: click.Context,
        /,
        *,
        names: tuple[str, ...],
        reason: str | None,
        actor: str | None,
        as_json: bool,
    ) -> None:
        with open_app(ctx) as mf:
            console = Console(mf)
            act = console.pause_queues if action == "pause" else console.resume_queues
            result = act(list(names), actor=actor or default_actor(), reason=reason)
        _report(result, as_json)
        if result.refused_queues:
            ctx.exit(2)


def _report(result: BulkResult, as_json: bool) -> None:
    if as_json:
        echo_json(queue_bulk_json(result))
        return
    past = "paused" if result.action == "pause" else "resumed"
    for name in result.done_queues:
        click.echo(f"queue {name} {past}")
    for name, why in result.refused_queues.items():
        click.echo(f"refused queue {name}: {why}", err=True)


_queue_command("pause", "Stop every worker claiming from the named queues (enqueue goes on).")
_queue_command("resume", "Let workers claim from the named queues again.")

"""``mailfathom schedules list|pause|resume`` and ``mailfathom workers``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from mailfathom import hints
from mailfathom.cli.common import default_actor, echo_json, open_app, reports_errors, rich_out
from mailfathom.console import Console
from mailfathom.console.serialize import schedule_json, worker_json

__all__ = ["schedules", "workers"]


@click.group()
def schedules() -> None:
    """List, pause and resume recurring schedules."""


@schedules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def list_schedules(ctx: click.Context, /, *, as_json: bool) -> None:
    """Every stored schedule, its next tick and whether it is paused."""
    with open_app(ctx) as mf:
        console = Console(mf)
        found, now = console.schedules(), console.now()
    if as_json:
        echo_json([schedule_json(s, now) for s in found])
        return
    if not found:
        click.echo("no schedules stored: a worker writes its app's schedules when it starts")
        return
    table = Table("name", "cron", "zone", "kind", "queue", "next tick (UTC)", "last job", "state")
    for s in found:
        why = f": {escape(s.pause_reason)}" if s.pause_reason else ""
        state = f"[yellow]paused[/] by {escape(s.paused_by or '?')}{why}" if s.paused else "active"
        table.add_row(
            escape(s.name),
            escape(s.cron),
            escape(s.timezone),
            escape(s.kind),
            escape(s.queue),
            "—" if s.paused else f"{s.next_tick(now):%Y-%m-%d %H:%M:%S}",
            str(s.last_job_id or "—"),
            state,
        )
    rich_out().print(table)


@schedules.command()
@click.argument("name")
@click.option("--reason", default=None, help="Why (shown with the schedule).")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def pause(ctx: click.Context, /, *, name: str, reason: str | None, actor: str | None) -> None:
    """Stop every worker from enqueueing NAME until it is resumed."""
    with open_app(ctx) as mf:
        schedule = Console(mf).pause_schedule(name, actor=actor or default_actor(), reason=reason)
    click.echo(f"schedule {schedule.name} paused")


@schedules.command()
@click.argument("name")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def resume(ctx: click.Context, /, *, name: str, actor: str | None) -> None:
    """Enqueue NAME again from its next tick (ticks missed while paused are skipped)."""
    with open_app(ctx) as mf:
        console = Console(mf)
        schedule = console.resume_schedule(name, actor=actor or default_actor())
        upcoming = schedule.next_tick(console.now())
    click.echo(f"schedule {schedule.name} resumed; next tick {upcoming:%Y-%m-%d %H:%M:%S} UTC")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def workers(ctx: click.Context, /, *, as_json: bool) -> None:
    """Registered workers: alive, or silent past their lease."""
    with open_app(ctx) as mf:
        found = Console(mf).workers()
    if as_json:
        echo_json([worker_json(w) for w in found])
        return
    if not found:
        click.echo(f"no workers registered: start one with {hints.command('worker')}")
        return
    table = Table("id", "host", "pid", "queues", "concurrency", "started (UTC)", "heartbeat", "")
    for w in found:
        table.add_row(
            escape(w.id),
            escape(w.host),
            str(w.pid),
            escape(", ".join(w.queues)) if w.queues is not None else "all",
            str(w.concurrency),
            f"{w.started_at:%Y-%m-%d %H:%M:%S}",
            f"{w.last_heartbeat_at:%H:%M:%S}",
            "[green]alive[/]" if w.alive else "[red]silent past its lease[/]",
        )
    rich_out().print(table)

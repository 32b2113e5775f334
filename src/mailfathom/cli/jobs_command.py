"""``mailfathom enqueue`` and ``mailfathom jobs list|show|counts|requeue|drop|release|hold|

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
run-now|abort``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mailfathom.cli.common import (
    app_option,
    default_actor,
    echo_json,
    open_app,
    reports_errors,
    rich_out,
)
from mailfathom.console import Console, JobQuery, parse_duration
from mailfathom.console.serialize import (
    bulk_json,
    job_detail_json,
    job_json,
    job_page_json,
    pretty_json,
)
from mailfathom.console.service import ACTIONS, BulkResult, JobDetail, parse_instant, parse_payload
from mailfathom.errors import InvalidInput
from mailfathom.jobs.model import Job

__all__ = ["enqueue", "jobs"]

F = TypeVar("F", bound=Callable[..., Any])
_STYLE = {
    "Pending": "cyan",
    "Claimed": "blue",
    "Succeeded": "green",
    "DeadLettered": "bold red",
    "Dropped": "dim",
}


def filter_options(command: F) -> F:
    """The job filter options every listing and bulk action takes."""
    for name, help_text in reversed(
        [
            ("--state", "Pending, Claimed, Succeeded, DeadLettered, Dropped, or Held."),
            ("--kind", "Only jobs of this kind."),
            ("--queue", "Only jobs in this queue."),
            ("--text", "Text in the failure reason, idempotency key or payload."),
            ("--older-than", "Enqueued longer ago than this (30m, 2h, 7d)."),
            ("--newer-than", "Enqueued more recently than this (30m, 2h, 7d)."),
        ]
    ):
        command = click.option(name, default=None, help=help_text)(command)
    return command


def _query(options: dict[str, Any]) -> JobQuery:
    return JobQuery.parse({name: options.get(name) for name in _QUERY_FIELDS})


_QUERY_FIELDS = ("state", "kind", "queue", "text", "older_than", "newer_than")


@click.command()
@click.argument("kind")
@click.option("--payload", default="{}", help="JSON object of the handler's keyword arguments.")
@click.option("--queue", default=None, help="Queue (default: the kind's, else 'default').")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--run-at", default=None, help="When to run, ISO 8601 (UTC unless a zone is given).")
@click.option("--delay", default=None, help="Run after this long (30s, 10m, 2h).")
@click.option("--hold", is_flag=True, help="Hold until an operator releases it.")
@click.option("--key", default=None, help="Idempotency key: an existing key enqueues nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app_option
@click.pass_context
@reports_errors
def enqueue(
    ctx: click.Context,
    /,
    *,
    kind: str,
    payload: str,
    queue: str | None,
    priority: int,
    run_at: str | None,
    delay: str | None,
    hold: bool,
    key: str | None,
    as_json: bool,
    app_spec: str | None,
) -> None:
    """Enqueue one job of KIND.

    An app that registers job kinds accepts only those (unless its strict_kinds setting
    is false), so a typo fails here and nothing is written; with no app loaded, any
    kind, as from a service that only produces jobs.
    """
    if sum(x is not None for x in (run_at, delay)) + hold > 1:
        raise InvalidInput("give at most one of --run-at, --delay and --hold")
    body = parse_payload(payload)
    with open_app(ctx, app_spec) as mf:
        job = mf.enqueue(
            kind,
            body,
            queue=queue,
            priority=priority,
            run_at=None if run_at is None else parse_instant(run_at),
            delay=None if delay is None else parse_duration(delay, what="--delay"),
            hold=hold,
            idempotency_key=key,
        )
    if as_json:
        echo_json({**job_json(job), "created": job.created})
        return
    verb = "enqueued" if job.created else "already exists (same key):"
    click.echo(f"{verb} job {job.id} ({job.kind}, queue {job.queue}, {_state(job)})")


@click.group()
def jobs() -> None:
    """List, inspect and act on jobs."""


@jobs.command("list")
@filter_options
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--before", type=click.IntRange(1), default=None, help="Page: jobs older than id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def list_jobs(
    ctx: click.Context, /, *, limit: int, before: int | None, as_json: bool, **filters: Any
) -> None:
    """Jobs newest first, filtered."""
    query = _query(filters)
    with open_app(ctx) as mf:
        page = Console(mf).jobs(query, before_id=before, limit=limit)
    if as_json:
        echo_json(job_page_json(page))
        return
    out = rich_out()
    if not page.jobs:
        out.print(f"no {query.describe()}", markup=False)
        return
    table = Table("id", "state", "kind", "queue", "prio", "attempts", "created (UTC)", "failure")
    for job in page.jobs:
        table.add_row(
            str(job.id),
            f"[{_STYLE[job.state.value]}]{_state(job)}[/]",
            escape(job.kind),
            escape(job.queue),
            str(job.priority),
            f"{job.attempts - job.attempt_base}/{job.max_attempts}",
            job.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            escape(_short(job.failure_reason)),
        )
    out.print(table)
    if page.next_before is not None:
        out.print(f"more: add --before {page.next_before}")


@jobs.command()
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def show(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """One job: payload, result, every attempt with its traceback, and its audit trail."""
    with open_app(ctx) as mf:
        detail = Console(mf).job(job_id)
    if as_json:
        echo_json(job_detail_json(detail))
        return
    _print_detail(detail)


@jobs.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def counts(ctx: click.Context, as_json: bool) -> None:
    """How many jobs are in each state (and how many are held)."""
    with open_app(ctx) as mf:
        found = mf.jobs.counts()
        held = mf.jobs.held_count()
    if as_json:
        echo_json({**{state.value: n for state, n in found.items()}, "Held": held})
        return
    table = Table("state", "jobs")
    for state, n in found.items():
        table.add_row(f"[{_STYLE[state.value]}]{state.value}[/]", f"{n:,}")
    table.add_row("[yellow](of Pending) Held[/]", f"{held:,}")
    rich_out().print(table)


def _action_command(action: str, summary: str) -> None:
    @jobs.command(action.replace("_", "-"), help=summary)
    @click.argument("job_ids", nargs=-1, type=click.IntRange(1))
    @filter_options
    @click.option("--all", "every", is_flag=True, help=f"Every {ACTIONS[action]} job, no filter.")
    @click.option("--reason", default=None, help="Why (kept in the audit trail).")
    @click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
    @click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.pass_context
    @reports_errors
    def command(
        ctx: click.Context,
        /,
        *,
        job_ids: tuple[int, ...],
        every: bool,
        reason: str | None,
        actor: str | None,
        yes: bool,
        as_json: bool,
        **filters: Any,
    ) -> None:
        query = _query(filters)
        if job_ids and (every or not query.empty):
            raise InvalidInput("give job ids or a filter, not both; nothing changed")
        if not job_ids and not every and query.empty:
            raise InvalidInput(
                f"say which jobs: give job ids, a filter (--kind, --queue, --text, --older-than, "
                f"--newer-than), or --all for every {ACTIONS[action]} job; nothing changed"
            )
        who = actor or default_actor()
        with open_app(ctx) as mf:
            console = Console(mf)
            if len(job_ids) == 1:
                job = console.act(action, job_ids[0], actor=who, reason=reason)
                if as_json:
                    echo_json(job_json(job))
                else:
                    click.echo(f"job {job.id}: {_past(action)}, now {_state(job)}")
                return
            ids = list(job_ids) or console.matching_ids(action, query)
            if not ids:
                click.echo(f"no {query.with_state(ACTIONS[action]).describe()}; nothing changed")
                return
            if not job_ids and not yes:
                what = query.with_state(ACTIONS[action]).describe()
                click.confirm(f"{action} {len(ids)} {what}?", abort=True, err=True)
            result = _run_bulk(console, action, ids, who, reason, quiet=as_json)
        if as_json:
            echo_json(bulk_json(result))
        else:
            _print_bulk(result)
        if result.refused:
            ctx.exit(2)


def _run_bulk(
    console: Console, action: str, ids: list[int], actor: str, reason: str | None, *, quiet: bool
) -> BulkResult:
    progress = Progress(
        TextColumn(f"{action}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=rich_out().__class__(stderr=True),
        disable=quiet,
        transient=False,
    )
    with progress:
        task = progress.add_task(action, total=len(ids))
        return console.bulk(
            action, ids, actor=actor, reason=reason, progress=lambda n: progress.advance(task, n)
        )


def _print_bulk(result: BulkResult) -> None:
    click.echo(f"{_past(result.action)} {len(result.done)} job(s)")
    for job_id, why in result.refused.items():
        click.echo(f"refused job {job_id}: {why}", err=True)


_action_command("requeue", "Requeue dead-lettered jobs (by id, or every one matching a filter).")
_action_command("drop", "Drop dead-lettered jobs for good (by id, or by filter).")
_action_command("release", "Run held jobs now (by id, or every held job matching a filter).")
_action_command("hold", "Hold Pending jobs no worker has (by id, or by filter) until released.")
_action_command("run_now", "Make delayed or backed-off Pending jobs due now (by id, or by filter).")
_action_command(
    "abort",
    "Abort jobs for good: a Pending one is dead-lettered at once, a running (Claimed) one "
    "is stopped by its worker and dead-lettered. Over a filter, only Claimed jobs are taken.",
)


def _print_detail(detail: JobDetail) -> None:
    job = detail.job
    out = rich_out()
    table = Table.grid(padding=(0, 2))
    for label, value in (
        ("id", job.id),
        ("kind", job.kind),
        ("queue", job.queue),
        ("state", _state(job)),
        ("priority", job.priority),
        ("idempotency key", job.idempotency_key or "-"),
        ("attempts", f"{job.attempts} ({job.attempts_left} left of {job.max_attempts})"),
        ("created", job.created_at.isoformat()),
        ("available", job.available_at.isoformat() if job.available_at else "held"),
        ("finished", job.finished_at.isoformat() if job.finished_at else "-"),
        ("lease", f"{job.lease_owner} until {job.lease_expires_at}" if job.lease_owner else "-"),
        ("failure", f"{job.failure_class}: {job.failure_reason}" if job.failure_class else "-"),
    ):
        table.add_row(f"[bold]{label}[/]", escape(str(value)))
    out.print(table)
    out.print("[bold]payload[/]")
    out.print(pretty_json(job.payload, sort_keys=False), markup=False)
    if job.state.value == "Succeeded":  # what its handler returned
        out.print("[bold]result[/]")
        if job.compacted:
            out.print("removed by retention")
        else:
            out.print(pretty_json(job.result, sort_keys=False), markup=False)
    out.print(f"[bold]attempts[/] ({len(detail.attempts)})")
    for attempt in detail.attempts:
        out.print(
            f"  #{attempt.attempt} {attempt.outcome.value} by {attempt.worker or '-'} at "
            f"{attempt.finished_at}: {attempt.error_type or ''} {attempt.message or ''}",
            markup=False,
        )
        if attempt.traceback:
            out.print(attempt.traceback.rstrip(), markup=False)
    out.print(f"[bold]audit trail[/] ({len(detail.events)})")
    for event in detail.events:
        out.print(
            f"  {event.at.isoformat()} {event.actor} {event.action}: {event.from_state.value} → "
            f"{event.to_state.value}" + (f" ({event.reason})" if event.reason else ""),
            markup=False,
        )


def _state(job: Job) -> str:
    return "Pending (held)" if job.held else job.state.value


def _short(text: str | None, width: int = 60) -> str:
    if not text:
        return ""
    line = text.splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _past(action: str) -> str:
    return {
        "requeue": "requeued",
        "drop": "dropped",
        "release": "released",
        "hold": "held",
        "run_now": "made due now",
        "abort": "abort requested",
    }[action]

"""``mailfathom outbox list|show|cancel|unknown|resolve|record-again``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from mailfathom.cli.common import default_actor, echo_json, open_app, reports_errors, rich_out
from mailfathom.console import Console
from mailfathom.console.serialize import (
    email_detail_json,
    email_page_json,
    unknown_page_json,
)
from mailfathom.delivery.model import OutgoingEmail

__all__ = ["outbox"]

_STYLE = {
    "Recorded": "cyan",
    "TransmissionBegun": "bold yellow",
    "Sent": "green",
    "Refused": "red",
    "Cancelled": "dim",
}


@click.group()
def outbox() -> None:
    """Outgoing email: list, inspect, cancel, and resolve unknown outcomes."""


def _table(emails: list[OutgoingEmail]) -> Table:
    table = Table("id", "stage", "from", "to", "subject", "attempts", "recorded (UTC)", "reason")
    for e in emails:
        table.add_row(
            str(e.id),
            f"[{_STYLE[e.stage.value]}]{e.stage.value}[/]",
            escape(e.sender),
            escape(", ".join(r.address for r in e.recipients)),
            escape(e.subject or ""),
            str(e.attempts),
            f"{e.created_at:%Y-%m-%d %H:%M:%S}",
            escape((e.reason or "")[:60]),
        )
    return table


@outbox.command("list")
@click.option(
    "--stage", default=None, help="Recorded, TransmissionBegun, Sent, Refused, Cancelled."
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--before", type=click.IntRange(1), default=None, help="Page: records older than id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def list_emails(
    ctx: click.Context, /, *, stage: str | None, limit: int, before: int | None, as_json: bool
) -> None:
    """Outgoing email, newest first."""
    with open_app(ctx) as mf:
        page = Console(mf).outbox(stage, before_id=before, limit=limit)
    if as_json:
        echo_json(email_page_json(page))
        return
    if not page.emails:
        click.echo("no outgoing email" + (f" in stage {stage}" if stage else ""))
        return
    rich_out().print(_table(page.emails))
    if page.next_before is not None:
        click.echo(f"more: add --before {page.next_before}")


@outbox.command()
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--after", type=click.IntRange(1), default=None, help="Page: records newer than id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def unknown(ctx: click.Context, /, *, limit: int, after: int | None, as_json: bool) -> None:
    """Unknown outcomes, oldest first: the body went out, the answer was never read."""
    with open_app(ctx) as mf:
        page = Console(mf).unknown_outcomes(after_id=after, limit=limit)
    if as_json:
        echo_json(unknown_page_json(page))
        return
    if not page.emails:
        click.echo("no unknown outcomes" + (f" after {after}" if after else ""))
        return
    rich_out().print(_table(page.emails))
    click.echo(f"{page.total} unknown outcome{'' if page.total == 1 else 's'} in all")
    if page.next_after is not None:
        click.echo(f"more: add --after {page.next_after}")
    click.echo(
        "resolve each: mailfathom outbox resolve ID delivered|send_again|give_up --reason '…'"
    )


@outbox.command()
@click.argument("email_id", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reports_errors
def show(ctx: click.Context, /, *, email_id: int, as_json: bool) -> None:
    """One record: envelope, per-recipient outcomes, stage history, audit trail."""
    with open_app(ctx) as mf:
        detail = Console(mf).email(email_id)
    if as_json:
        echo_json(email_detail_json(detail))
        return
    e = detail.email
    out = rich_out()
    grid = Table.grid(padding=(0, 2))
    for label, value in (
        ("id", e.id),
        ("stage", e.stage.value),
        ("message-id", e.message_id),
        ("subject", e.subject or ""),
        ("envelope from", e.sender),
        ("size", f"{e.size} bytes"),
        ("delivery job", e.job_id or "-"),
        ("split from", e.parent_id or "-"),
        ("part of message", e.root_id or "-"),
        ("priority", e.priority),
        ("last reply", f"{e.reply_code} {e.reply_text or ''}" if e.reply_code else "-"),
        ("reason", e.reason or "-"),
    ):
        grid.add_row(f"[bold]{label}[/]", escape(str(value)))
    out.print(grid)
    recipients = Table("recipient", "reply", "enhanced", "text", "at (UTC)")
    for r in e.recipients:
        recipients.add_row(
            escape(r.address),
            str(r.reply_code or "—"),
            escape(r.enhanced_status or ""),
            escape(r.reply_text or ""),
            f"{r.replied_at:%Y-%m-%d %H:%M:%S}" if r.replied_at else "—",
        )
    out.print(recipients)
    if e.parts:
        parts = Table("part", "stage", "recipients", "attempts")
        for p in e.parts:
            addresses = ", ".join(r.address for r in p.recipients)
            parts.add_row(str(p.id), p.stage.value, escape(addresses), str(p.attempts))
        out.print(parts)
    out.print("[bold]stage history[/]")
    for entry in detail.history:
        out.print(f"  {entry.at:%Y-%m-%d %H:%M:%S} {entry.stage}: {entry.detail}", markup=False)


@outbox.command()
@click.argument("email_id", type=click.IntRange(1))
@click.option("--reason", default=None, help="Why (kept in the audit trail).")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def cancel(ctx: click.Context, /, *, email_id: int, reason: str | None, actor: str | None) -> None:
    """Cancel a Recorded email (every Recorded part of a message): it will never be sent."""
    with open_app(ctx) as mf:
        email = Console(mf).cancel_email(email_id, actor=actor or default_actor(), reason=reason)
    click.echo(f"email {email.id}: {email.stage.value}")
    if email.parts:
        click.echo("cancelled parts: " + ", ".join(str(p.id) for p in email.cancelled))
        if email.begun:
            begun = ", ".join(f"{p.id} ({p.stage.value})" for p in email.begun)
            click.echo(f"left alone, their transmission had begun: {begun}")


@outbox.command()
@click.argument("email_id", type=click.IntRange(1))
@click.argument("decision", type=click.Choice(["delivered", "send_again", "give_up"]))
@click.option("--reason", required=True, help="What you checked, and why you decide this.")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def resolve(
    ctx: click.Context, /, *, email_id: int, decision: str, reason: str, actor: str | None
) -> None:
    """Settle an unknown outcome: delivered (→ Sent), send_again (→ Recorded), give_up."""
    with open_app(ctx) as mf:
        email = Console(mf).resolve_email(
            email_id, decision, actor=actor or default_actor(), reason=reason
        )
    click.echo(f"email {email.id}: resolved as {decision}, now {email.stage.value}")


@outbox.command("record-again")
@click.argument("email_id", type=click.IntRange(1))
@click.option("--reason", default=None, help="Why (kept in the audit trail).")
@click.option("--actor", default=None, help="Who acts (default cli:<your login>).")
@click.pass_context
@reports_errors
def record_again(
    ctx: click.Context, /, *, email_id: int, reason: str | None, actor: str | None
) -> None:
    """Record a Refused email's exact bytes again, as a new message delivered afresh."""
    with open_app(ctx) as mf:
        email = Console(mf).record_email_again(
            email_id, actor=actor or default_actor(), reason=reason
        )
    click.echo(f"recorded again as email {email.id} ({email.stage.value})")

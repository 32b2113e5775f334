"""``mailfathom dev``: everything on one machine for a developer, in one command.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Migrates the database (default ``sqlite:///mailfathom.db``), starts a capture
SMTP server (nothing is relayed: messages land in the console's Inbox), a
worker that delivers the outbox to it, and the web console on loopback, which
needs a token like any other (made on first use and kept, readable only by you,
in ``.mailfathom-dev/console-token``); then prints the URL and a one-time login
link. Ctrl-C stops all of it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import click

from mailfathom.app import MailFathom
from mailfathom.cli.common import open_app, reports_errors
from mailfathom.observability import logs, metrics
from mailfathom.store import redact_url
from mailfathom.web.login_links import login_link
from mailfathom.web.tokens import own_token_file

__all__ = ["DEV_FOLDER", "dev"]

#: The dev tools' own files: the captured mail, and the console token.
DEV_FOLDER = ".mailfathom-dev"


@click.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8025,
    show_default=True,
    help="Console port (on 127.0.0.1).",
)
@click.option(
    "--smtp-port",
    type=click.IntRange(1, 65535),
    default=1025,
    show_default=True,
    help="Capture SMTP port (on 127.0.0.1).",
)
@click.option(
    "--inbox",
    "inbox_dir",
    default=f"{DEV_FOLDER}/inbox",
    show_default=True,
    help="Maildir folder the captured mail is kept in.",
)
@click.option(
    "--app",
    "app_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Your MailFathom app, for its job kinds and schedules (e.g. examples.app:mf).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 100),
    default=4,
    show_default=True,
    help="Jobs the dev worker runs at once.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per line with every field.",
)
@click.pass_context
@reports_errors
def dev(
    ctx: click.Context,
    /,
    *,
    port: int,
    smtp_port: int,
    inbox_dir: str,
    app_spec: str | None,
    concurrency: int,
    log_format: str,
) -> None:
    """Run the console, a worker and a capture SMTP server together, for development.

    The console needs a token like any other: it is kept in .mailfathom-dev/console-token
    (made on first use, readable only by you); open the one-time login link it prints.
    """
    # here, not at the top: the console's server and the capture SMTP server (aiosmtpd,
    # ~0.1 s) load for this command only, not at every start of the command line
    from mailfathom.devmail import CaptureServer, Inbox
    from mailfathom.web.server import build_console_app, console_url, serve

    logs.configure("warning", log_format)
    token = own_token_file(Path(DEV_FOLDER) / "console-token")
    if token.warning is not None:
        click.echo(token.warning, err=True)
    metrics.install()  # the console's /metrics shows the dev worker's counters too
    capture = CaptureServer(Inbox(Path(inbox_dir)), port=smtp_port)
    capture.start()
    # the app (yours, or a bare one) delivers to the capture server
    os.environ["MAILFATHOM_SMTP_URL"] = capture.url
    try:
        with open_app(ctx, app_spec) as loaded:
            mf = (
                loaded if loaded.settings.smtp_url == capture.url else _rebuilt(loaded, capture.url)
            )
            mf.migrate()
            worker = mf.worker(concurrency=concurrency, shutdown_timeout=5)
            working = threading.Thread(target=worker.run, name="mailfathom-dev-worker", daemon=True)
            working.start()
            app = build_console_app(mf, host="127.0.0.1", token=token.token, inbox=capture.inbox)
            url = console_url("127.0.0.1", port)
            click.echo(
                f"mailfathom dev\n"
                f"  console   {url}\n"
                f"  log in    {login_link(app, url)} (works once, within 15 minutes)\n"
                f"  token     {token.path} (readable only by you; for the API and later logins)\n"
                f"  smtp      {capture.url} (captured, never relayed; Inbox in the console)\n"
                f"  database  {redact_url(mf.settings.database_url)}\n"
                f"  worker    {worker.id}, kinds: {', '.join(mf.registry.names())}\n"
                "Press Ctrl-C to stop."
            )
            try:
                serve(app, host="127.0.0.1", port=port)
            finally:
                worker.stop()
                working.join(10)
    finally:
        capture.stop()


def _rebuilt(mf: Any, smtp_url: str) -> Any:
    """A bare app on ``mf``'s database delivering to ``smtp_url`` (an app built with its own
    SMTP URL keeps it; the dev worker must deliver to the capture server)."""
    click.echo(
        f"note: the app names its own SMTP server ({redact_url(str(mf.settings.smtp_url))}); "
        "mailfathom dev delivers to the capture server instead",
        err=True,
    )
    rebuilt = MailFathom(mf.settings.database_url, smtp_url=smtp_url)
    for name in mf.registry.names():
        kind = mf.registry.get(name)
        if kind is not None and rebuilt.registry.get(name) is None:
            rebuilt.registry.add(kind)
    return rebuilt

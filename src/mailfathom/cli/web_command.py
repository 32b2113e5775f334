"""``mailfathom web``: serve the operator console."""

from __future__ import annotations

import click

from mailfathom.cli.common import app_option, open_app, reports_errors
from mailfathom.config import Settings
from mailfathom.store import redact_url

__all__ = ["web"]


@click.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default 8025).")
@click.option(
    "--token",
    envvar="MAILFATHOM_WEB_TOKEN",
    default=None,
    help="Require this token everywhere (required off loopback). Prefer MAILFATHOM_WEB_TOKEN.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per line with every field.",
)
@app_option
@click.pass_context
@reports_errors
def web(
    ctx: click.Context,
    /,
    *,
    host: str | None,
    port: int | None,
    token: str | None,
    log_format: str,
    app_spec: str | None,
) -> None:
    """Serve the web console and its JSON API (http://127.0.0.1:8025/ by default)."""
    from mailfathom.observability import logs
    from mailfathom.web.server import build_console_app, console_url, serve

    logs.configure("warning", log_format)

    settings = Settings.load({"web_host": host, "web_port": port, "web_token": token})
    with open_app(ctx, app_spec) as mf:
        app = build_console_app(
            mf,
            host=settings.web_host,
            token=settings.web_token,
            secure_cookies=settings.web_secure_cookies,
        )
        click.echo(
            f"mailfathom console on {console_url(settings.web_host, settings.web_port)} "
            f"(database {redact_url(mf.settings.database_url)}"
            + (", token required)" if settings.web_token else ", loopback only, no token)")
        )
        serve(app, host=settings.web_host, port=settings.web_port)

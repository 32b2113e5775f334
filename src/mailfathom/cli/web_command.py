"""``mailfathom web``: serve the operator console.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from mailfathom.cli.common import app_option, open_app, reports_errors
from mailfathom.errors import ConfigurationError
from mailfathom.observability import logs
from mailfathom.store import redact_url
from mailfathom.web.login_links import login_link
from mailfathom.web.security import is_loopback
from mailfathom.web.tokens import TokenFile, default_token_path, own_token_file, read_token_file

__all__ = ["web"]

_DEPRECATED_OPTION = (  # the warning --token prints
    "warning: --token is deprecated: any user of this machine can read it in `ps`. Put the "
    "token in MAILFATHOM_WEB_TOKEN or in a file readable only by you, named by --token-file."
)


@click.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default 8025).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the console token from this file, readable only by you (on loopback "
    "without one, a token is made and kept in $XDG_STATE_HOME/mailfathom/console-token).",
)
@click.option(
    "--token",
    envvar="MAILFATHOM_WEB_TOKEN",
    default=None,
    help="Deprecated on the command line (visible in ps): use MAILFATHOM_WEB_TOKEN or "
    "--token-file.",
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
    token_file: Path | None,
    token: str | None,
    log_format: str,
    app_spec: str | None,
) -> None:
    """Serve the web console and its JSON API (http://127.0.0.1:8025/ by default).

    Every page and API call needs the console token. Without MAILFATHOM_WEB_TOKEN or
    --token-file, on a loopback address, the console makes one and keeps it in a file
    readable only by you (it prints where), and prints a one-time login link.
    """
    # here, not at the top: the console's server (with aiosmtpd for its inbox, ~0.1 s)
    # loads for this command only, not at every start of the command line
    from mailfathom.web.server import build_console_app, console_url, serve

    if ctx.get_parameter_source("token") is click.core.ParameterSource.COMMANDLINE:
        click.echo(_DEPRECATED_OPTION, err=True)
    if token_file is not None:
        if token is not None:
            raise ConfigurationError(
                "give the console token once: --token-file, or MAILFATHOM_WEB_TOKEN, not both"
            )
        token = _told(read_token_file(token_file)).token
    logs.configure("warning", log_format)
    with open_app(ctx, app_spec) as mf:
        # The app's own settings (a framework integration's included) unless given here.
        given = {"web_host": host, "web_port": port, "web_token": token}
        settings = replace(mf.settings, **{k: v for k, v in given.items() if v is not None})
        made: TokenFile | None = None
        if not settings.web_token and is_loopback(settings.web_host):
            made = _told(own_token_file(default_token_path()))
            settings = replace(settings, web_token=made.token)
        app = build_console_app(
            mf,
            host=settings.web_host,
            token=settings.web_token,
            secure_cookies=settings.web_secure_cookies,
        )
        url = console_url(settings.web_host, settings.web_port)
        click.echo(
            f"mailfathom console on {url} "
            f"(database {redact_url(mf.settings.database_url)}, token required)"
        )
        if made is not None:
            state = "made now, readable only by you" if made.created else "kept from before"
            click.echo(f"  token     {made.path} ({state})")
            click.echo(
                f'  API       curl -H "Authorization: Bearer $(cat {made.path})" {url}api/jobs'
            )
            click.echo(f"  log in    {login_link(app, url)} (works once, within 15 minutes)")
        serve(app, host=settings.web_host, port=settings.web_port)


def _told(found: TokenFile) -> TokenFile:
    """``found``, once its warning (if any) is printed."""
    if found.warning is not None:
        click.echo(found.warning, err=True)
    return found

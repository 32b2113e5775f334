"""``mailfathom web``: serve the operator console."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from mailfathom.cli.common import app_option, open_app, reports_errors
from mailfathom.errors import ConfigurationError
from mailfathom.store import redact_url

__all__ = ["read_token_file", "web"]

_DEPRECATED_OPTION = (  # the warning --token prints
    "warning: --token is deprecated: any user of this machine can read it in `ps`. Put the "
    "token in MAILFATHOM_WEB_TOKEN or in a file readable only by you, named by --token-file."
)


def read_token_file(path: Path) -> str:
    """The token in ``path`` (one line; surrounding whitespace ignored)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"cannot read the console token from {str(path)!r} ({type(exc).__name__}): "
            "name a readable UTF-8 file holding only the token"
        ) from None
    token = text.strip()
    if not token or "\n" in token:
        from mailfathom.web.security import MAKE_TOKEN

        raise ConfigurationError(
            f"{str(path)!r} must hold the console token alone, on one line: make one with "
            f"{MAKE_TOKEN} > {path}"
        )
    return token


@click.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default 8025).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the console token from this file (required off loopback, unless "
    "MAILFATHOM_WEB_TOKEN is set).",
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
    """Serve the web console and its JSON API (http://127.0.0.1:8025/ by default)."""
    from mailfathom.observability import logs
    from mailfathom.web.server import build_console_app, console_url, serve

    if ctx.get_parameter_source("token") is click.core.ParameterSource.COMMANDLINE:
        click.echo(_DEPRECATED_OPTION, err=True)
    if token_file is not None:
        if token is not None:
            raise ConfigurationError(
                "give the console token once: --token-file, or MAILFATHOM_WEB_TOKEN, not both"
            )
        token = read_token_file(token_file)
    logs.configure("warning", log_format)
    with open_app(ctx, app_spec) as mf:
        # The app's own settings (a framework integration's included) unless given here.
        given = {"web_host": host, "web_port": port, "web_token": token}
        settings = replace(mf.settings, **{k: v for k, v in given.items() if v is not None})
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

"""``mailfathom health``: an exit status for liveness and readiness probes.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Exit 0 when every check passes, 1 when one fails (each check is printed, or the
report as JSON with ``--json``). The checks: the database answers, every migration
is applied, with ``--worker ID`` that worker's heartbeat is within its lease
(``mailfathom workers`` lists the ids), and when an SMTP server is configured
(``MAILFATHOM_SMTP_URL``) that it takes this client's credentials (a configuration
error fails, an unreachable server does not). A SQLite file that does not exist fails
without being created. Under a framework integration (``manage.py mailfathom
health``) the database and the SMTP server are the integration's (Django's
``DATABASES`` alias).
"""

from __future__ import annotations

import json

import click

from mailfathom.cli.common import preset_app, refuse_with_preset, reports_errors
from mailfathom.clock import SystemClock
from mailfathom.config import Settings
from mailfathom.delivery.smtp_config import smtp_probe
from mailfathom.observability.health import check_url

__all__ = ["health"]


@click.command("health")
@click.option(
    "--worker",
    "worker_id",
    default=None,
    metavar="ID",
    help="Also check that this worker's heartbeat is fresh (liveness of that worker).",
)
@click.option(
    "--smtp/--no-smtp",
    "check_smtp",
    default=True,
    help="Try the configured SMTP server's credentials (a login, no message); default on.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@reports_errors
def health(ctx: click.Context, worker_id: str | None, check_smtp: bool, as_json: bool) -> None:
    """Check the database, its migrations, (with --worker) a worker's heartbeat and,
    when an SMTP server is configured, that it accepts this configuration."""
    preset = preset_app(ctx)  # a framework integration's app: check its database
    if preset is not None:
        refuse_with_preset(ctx)
        settings = preset.settings
    else:
        settings = Settings.load({"database_url": ctx.obj["database"]})
    smtp = None
    if check_smtp and settings.smtp_url is not None:
        smtp = smtp_probe(settings.smtp_url, timeout=min(settings.smtp_timeout, 10.0))
    report = check_url(settings.database_url, SystemClock(), worker_id=worker_id, smtp=smtp)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
    else:
        for check in report.checks:
            click.echo(f"{'ok' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    ctx.exit(0 if report.ok else 1)

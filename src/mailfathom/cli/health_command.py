"""``mailfathom health``: an exit status for liveness and readiness probes.

Exit 0 when every check passes, 1 when one fails (each check is printed, or the
report as JSON with ``--json``). The checks: the database answers, every migration
is applied, and with ``--worker ID`` that worker's heartbeat is within its lease
(``mailfathom workers`` lists the ids). A SQLite file that does not exist fails
without being created. Under a framework integration (``manage.py mailfathom
health``) the database is the integration's (Django's ``DATABASES`` alias).
"""

from __future__ import annotations

import json

import click

from mailfathom.cli.common import preset_app, refuse_with_preset, reports_errors
from mailfathom.clock import SystemClock
from mailfathom.config import Settings
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
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@reports_errors
def health(ctx: click.Context, worker_id: str | None, as_json: bool) -> None:
    """Check the database, its migrations and (with --worker) a worker's heartbeat."""
    preset = preset_app(ctx)  # a framework integration's app: check its database
    if preset is not None:
        refuse_with_preset(ctx)
        url = preset.settings.database_url
    else:
        url = Settings.load({"database_url": ctx.obj["database"]}).database_url
    report = check_url(url, SystemClock(), worker_id=worker_id)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
    else:
        for check in report.checks:
            click.echo(f"{'ok' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    ctx.exit(0 if report.ok else 1)

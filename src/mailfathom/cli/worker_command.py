"""``mailfathom worker --app module:attr``: run a worker for an application's job kinds.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

The app is the ``MailFathom`` object your code builds (``mf = MailFathom()``);
the worker imports it, so every ``@mf.job`` handler and ``mf.schedule(...)``
declaration in that module is registered. The database URL comes from
``--database``, else ``MAILFATHOM_DATABASE_URL``, else ``mailfathom.toml``,
else ``sqlite:///mailfathom.db``; ``--database`` is handed to the app through
``MAILFATHOM_DATABASE_URL``, so the app must not hard-code another one.
"""

from __future__ import annotations

import logging
import os

import click

from mailfathom.cli.common import load_app, preset_app, refuse_with_preset
from mailfathom.cli.supervisor import Supervisor
from mailfathom.errors import InvalidInput
from mailfathom.jobs.flow.limits import parse_queues
from mailfathom.jobs.worker import readiness
from mailfathom.observability import logs
from mailfathom.observability.server import serve_worker_metrics

__all__ = ["worker"]

_LOG_LEVELS = ["debug", "info", "warning", "error"]


class _ProcessCount(click.ParamType[int]):
    """A whole number of worker processes, 1 or more."""

    name = "integer"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        try:
            count = int(str(value).strip())
        except ValueError:
            count = 0
        if count < 1:
            self.fail(
                f"{value!r} is not a number of processes: give a whole number of 1 or more, "
                f"e.g. --processes {os.cpu_count() or 2} (one per core)",
                param,
                ctx,
            )
        return count


@click.command("worker")
@click.option(
    "--app",
    "app_path",
    default=None,
    metavar="MODULE:ATTR",
    help="Your MailFathom object, e.g. examples.app:mf (the module is imported from the "
    "current folder or the Python path).",
)
@click.option(
    "--database",
    default=None,
    help="Database URL (default: MAILFATHOM_DATABASE_URL, else sqlite:///mailfathom.db); "
    "put one with a password in that variable instead: every local user can read a "
    "command line.",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Jobs at once [10].")
@click.option(
    "--queues",
    default=None,
    metavar="A,B",
    help="Comma-separated queues to take jobs from [every queue]; with slots of their own: "
    "mail=5,default=20 (concurrency is then their sum).",
)
@click.option("--burst", is_flag=True, help="Run what is due, then exit.")
@click.option(
    "--processes",
    type=_ProcessCount(),
    default=1,
    show_default=True,
    help="Worker processes to run under one supervisor (one core each; a SIGTERM/SIGINT "
    "stops them all, one that dies is restarted; docs/worker.md).",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds a claim lasts without a heartbeat; a dead worker's jobs return after it [30].",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds a stopping worker waits for running jobs before releasing them [30].",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS),
    default="info",
    show_default=True,
    help="Least important log lines shown (one line per attempt at info).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per line with every field (docs/observability.md).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve Prometheus /metrics and /healthz on this port [off].",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address /metrics listens on (loopback unless you say otherwise).",
)
@click.pass_context
def worker(
    ctx: click.Context,
    *,
    app_path: str | None,
    database: str | None,
    concurrency: int | None,
    queues: str | None,
    burst: bool,
    processes: int,
    lease: float | None,
    shutdown_timeout: float | None,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run a worker until SIGTERM/SIGINT (a second one exits at once), or with --burst
    until nothing is due."""
    logs.configure(log_level, log_format)
    readiness.enable()  # READY=1 / STOPPING=1 to a service manager's NOTIFY_SOCKET
    preset = preset_app(ctx)
    if preset is not None:
        refuse_with_preset(ctx)
    elif app_path is None:
        raise click.UsageError("Missing option '--app': give your app, e.g. --app myapp.jobs:mf")
    if database is None and isinstance(ctx.obj, dict):
        database = ctx.obj.get("database")
    names: list[str] | dict[str, int] | None = None
    if queues is not None:
        try:
            names = parse_queues(queues)
        except InvalidInput as exc:
            raise click.BadParameter(str(exc), param_hint="--queues") from None
    if processes > 1:
        _supervise(
            ctx,
            processes,
            app_path=str(app_path) if preset is None else None,
            database=database,
            burst=burst,
            metrics_port=metrics_port,
            command=_preset_worker_command(ctx) if preset is not None else None,
        )
        return
    app = preset if preset is not None else load_app(str(app_path), database)
    worker = app.worker(
        concurrency=concurrency, queues=names, lease=lease, shutdown_timeout=shutdown_timeout
    )
    server = None
    if metrics_port is not None:
        server = serve_worker_metrics(app, worker, host=metrics_host, port=metrics_port)
    try:
        worker.run(burst=burst)
    except SystemExit as stop:  # a second signal: leave now, without tearing anything down
        logging.shutdown()
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    if server is not None:
        server.stop()
    if preset is None:  # a preset app belongs to the integration that made it
        app.close()


def _supervise(
    ctx: click.Context,
    processes: int,
    *,
    app_path: str | None,
    database: str | None,
    burst: bool,
    metrics_port: int | None,
    command: list[str] | None,
) -> None:
    """``--processes N``: check the app loads here, then run N workers under a supervisor
    (``command``: a framework integration's own worker command, whose app is loaded)."""
    if app_path is None and command is None:
        raise click.UsageError(
            "--processes needs --app MODULE:ATTR (the worker processes import your app); "
            "with a framework integration, start one worker command per process instead"
        )
    if metrics_port is not None:
        raise click.UsageError(
            "--metrics-port serves one process's metrics: with --processes, run one worker "
            "command per process, each with its own --metrics-port"
        )
    if app_path is not None:
        load_app(app_path, database).close()  # a bad app is one clear error, not N
    args = [
        *(["--app", app_path] if app_path is not None else []),
        *_passed_on(ctx, ["concurrency", "queues", "lease", "shutdown_timeout"]),
        "--log-level",
        str(ctx.params["log_level"]),
        "--log-format",
        str(ctx.params["log_format"]),
    ]
    if burst:
        args.append("--burst")
    # The URL may hold a password: the workers read it from their environment (private
    # to their owner), never from their command line (readable by every local user).
    environ = dict(os.environ)
    if database is not None:
        environ["MAILFATHOM_DATABASE_URL"] = database
    status = Supervisor(args, processes, burst=burst, environ=environ, command=command).run()
    if status:
        raise SystemExit(status)


def _preset_worker_command(ctx: click.Context) -> list[str] | None:
    """The command a framework integration starts one worker process with (its preset
    ``obj["worker_command"]``, e.g. ``flask --app site mailfathom worker``), if it gave one."""
    obj = ctx.find_root().obj
    command = obj.get("worker_command") if isinstance(obj, dict) else None
    return [str(part) for part in command] if isinstance(command, list) else None


def _passed_on(ctx: click.Context, names: list[str]) -> list[str]:
    """The options ``names`` as given on the command line, for the worker processes."""
    args: list[str] = []
    for name in names:
        value = ctx.params[name]
        if value is not None:
            args += ["--" + name.replace("_", "-"), str(value)]
    return args

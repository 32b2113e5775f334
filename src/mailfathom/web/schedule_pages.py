"""Schedules (with pause and resume, each confirmed) and the worker registry.

Internal. Schedule names may contain ``/``, so the routes take the name as a
path and end with the action.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.render import flash, operator, page

__all__ = ["routes"]


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


@view
def schedules(request: Request) -> Response:
    """Every stored schedule: cron, zone, kind, next tick, last job, paused by whom and why."""
    console = _console(request)
    return page(
        request,
        "schedules.html",
        {"schedules": console.schedules(), "now": console.now(), "refresh": True},
    )


@view
def confirm(request: Request) -> Response:
    """What pausing or resuming this schedule will do."""
    name = str(request.path_params["name"])
    action = "pause" if request.url.path.endswith("/pause") else "resume"
    console = _console(request)
    schedule = console.schedule(name)
    return page(
        request,
        "schedule_confirm.html",
        {"schedule": schedule, "action": action, "now": console.now()},
    )


@form_action
def pause(request: Request, form: FormData) -> Response:
    """Pause the schedule on every worker."""
    name = str(request.path_params["name"])
    reason = form_values(form, "reason")["reason"]
    _console(request).pause_schedule(name, actor=operator(request), reason=reason)
    flash(request, f"Schedule {name} paused: no worker enqueues it until it is resumed.")
    return RedirectResponse("/schedules", status_code=303)


@form_action
def resume(request: Request, form: FormData) -> Response:
    """Resume the schedule from its next tick."""
    name = str(request.path_params["name"])
    _console(request).resume_schedule(name, actor=operator(request))
    flash(request, f"Schedule {name} resumed from its next tick.")
    return RedirectResponse("/schedules", status_code=303)


@view
def workers(request: Request) -> Response:
    """Every registered worker: host, pid, queues, concurrency, heartbeat, alive or not."""
    console = _console(request)
    return page(
        request,
        "workers.html",
        {"workers": console.workers(), "now": console.now(), "refresh": True},
    )


routes = [
    Route("/schedules", schedules, name="schedules"),
    Route("/schedules/{name:path}/pause", confirm, name="confirm_pause"),
    Route("/schedules/{name:path}/pause", pause, methods=["POST"], name="pause"),
    Route("/schedules/{name:path}/resume", confirm, name="confirm_resume"),
    Route("/schedules/{name:path}/resume", resume, methods=["POST"], name="resume"),
    Route("/workers", workers, name="workers"),
]

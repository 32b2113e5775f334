"""Schedules (with pause and resume, each confirmed) and the worker registry.

Internal. Schedule names may contain ``/`` and ``.`` (even be ``..``), which a
browser would resolve as path segments (``x/../../schedules/other/pause`` is
``/schedules/other/pause``), so the pages link with the name in the query string
(``/schedules/pause?name=…``) and post it as a form field. The older
``/schedules/<name>/pause`` routes still answer, for bookmarks and scripts.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.errors import InvalidInput
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


def _name(request: Request, form: FormData | None = None) -> str:
    """The schedule's name: from the path (``/schedules/<name>/pause``), else the form or query."""
    if "name" in request.path_params:
        return str(request.path_params["name"])
    given = form.get("name") if form is not None else None
    given = given if isinstance(given, str) else request.query_params.get("name")
    if not given:
        raise InvalidInput("name the schedule: /schedules/pause?name=<schedule name>")
    return given


@view
def confirm(request: Request) -> Response:
    """What pausing or resuming this schedule will do."""
    name = _name(request)
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
    name = _name(request, form)
    reason = form_values(form, "reason")["reason"]
    _console(request).pause_schedule(name, actor=operator(request), reason=reason)
    flash(request, f"Schedule {name} paused: no worker enqueues it until it is resumed.")
    return RedirectResponse("/schedules", status_code=303)


@form_action
def resume(request: Request, form: FormData) -> Response:
    """Resume the schedule from its next tick."""
    name = _name(request, form)
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
    Route("/schedules/pause", confirm, name="confirm_pause_named"),
    Route("/schedules/pause", pause, methods=["POST"], name="pause_named"),
    Route("/schedules/resume", confirm, name="confirm_resume_named"),
    Route("/schedules/resume", resume, methods=["POST"], name="resume_named"),
    Route("/schedules/{name:path}/pause", confirm, name="confirm_pause"),
    Route("/schedules/{name:path}/pause", pause, methods=["POST"], name="pause"),
    Route("/schedules/{name:path}/resume", confirm, name="confirm_resume"),
    Route("/schedules/{name:path}/resume", resume, methods=["POST"], name="resume"),
    Route("/workers", workers, name="workers"),
]

"""The queues page: every queue's backlog and pause, with pause and resume (confirmed).

Internal. A pause is fleet-wide and persisted (``mf.queues``): no worker claims
from the queue until it is resumed; enqueueing goes on.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.jobs.registry import check_name
from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.render import flash, operator, page

__all__ = ["routes"]


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _action(request: Request) -> str:
    return "pause" if request.url.path.endswith("/pause") else "resume"


@view
def queues(request: Request) -> Response:
    """Every queue with unfinished jobs or a pause: pending, held, running, paused by whom."""
    console = _console(request)
    return page(
        request,
        "queues.html",
        {"queues": console.queues(), "events": console.mf.queues.events(limit=20)},
    )


@view
def confirm(request: Request) -> Response:
    """What pausing or resuming this queue will do (``/queues/pause?queue=`` names any)."""
    raw = request.path_params.get("name", request.query_params.get("queue"))
    name = check_name("queue", str(raw), longest=100)
    return page(request, "queue_confirm.html", {"name": name, "action": _action(request)})


@form_action
def act(request: Request, form: FormData) -> Response:
    """Pause or resume the queue (audited), then show the queues."""
    name = str(request.path_params["name"])
    action = _action(request)
    reason = form_values(form, "reason")["reason"]
    console = _console(request)
    act = console.pause_queues if action == "pause" else console.resume_queues
    result = act([name], actor=operator(request), reason=reason)
    if result.refused_queues:
        flash(request, result.refused_queues[name])
    elif action == "pause":
        flash(request, f"Queue {name} paused: no worker claims from it until it is resumed.")
    else:
        flash(request, f"Queue {name} resumed: workers claim from it again.")
    return RedirectResponse("/queues", status_code=303)


routes = [
    Route("/queues", queues, name="queues"),
    Route("/queues/pause", confirm, name="confirm_pause_named_queue"),
    Route("/queues/{name}/pause", confirm, name="confirm_pause_queue"),
    Route("/queues/{name}/pause", act, methods=["POST"], name="pause_queue"),
    Route("/queues/{name}/resume", confirm, name="confirm_resume_queue"),
    Route("/queues/{name}/resume", act, methods=["POST"], name="resume_queue"),
]

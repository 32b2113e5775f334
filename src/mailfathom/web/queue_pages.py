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
from mailfathom.errors import InvalidInput
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


def _name(request: Request, form: FormData | None = None) -> str:
    """The queue's name: from the form or the query string (``/queues/pause?queue=<name>``),
    else the path (``/queues/<name>/pause``). Pages only link and post with the query or
    a form field: a name such as ``reports/../mail`` in a path is resolved by the browser
    to another queue's URL before it is sent."""
    given = form.get("queue") if form is not None else None
    if not isinstance(given, str):
        given = request.query_params.get("queue", request.path_params.get("name"))
    if not given:
        raise InvalidInput("name the queue: /queues/pause?queue=<queue name>")
    return check_name("queue", given, longest=100)


@view
def confirm(request: Request) -> Response:
    """What pausing or resuming this queue will do (``/queues/pause?queue=`` names any)."""
    name = _name(request)
    return page(request, "queue_confirm.html", {"name": name, "action": _action(request)})


@form_action
def act(request: Request, form: FormData) -> Response:
    """Pause or resume the queue (audited), then show the queues."""
    name = _name(request, form)
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
    Route("/queues/pause", act, methods=["POST"], name="pause_named_queue"),
    Route("/queues/resume", confirm, name="confirm_resume_named_queue"),
    Route("/queues/resume", act, methods=["POST"], name="resume_named_queue"),
    Route("/queues/{name:path}/pause", confirm, name="confirm_pause_queue"),
    Route("/queues/{name:path}/pause", act, methods=["POST"], name="pause_queue"),
    Route("/queues/{name:path}/resume", confirm, name="confirm_resume_queue"),
    Route("/queues/{name:path}/resume", act, methods=["POST"], name="resume_queue"),
]

"""The console's HTML pages for jobs: overview, list, detail, actions, new job, audit log
(logging in and out: :mod:`mailfathom.web.login_pages`).

Internal. Every handler reads through, and acts through, the one
:class:`~mailfathom.console.Console` on ``app.state.console``. Actions are two
steps: a GET that shows what will happen (the confirmation) and a CSRF-checked
POST that does it.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import ACTIONS, Console, JobQuery
from mailfathom.console.serialize import pretty_json
from mailfathom.console.service import parse_instant
from mailfathom.errors import InvalidInput
from mailfathom.jobs.state import JobState
from mailfathom.web.chart import SERIES, throughput_chart
from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.params import is_whole_number
from mailfathom.web.render import flash, operator, page

__all__ = ["routes"]

_FILTERS = ("state", "kind", "queue", "text", "older_than", "newer_than")
#: Where each kind of "waiting for an operator" item is dealt with.
ATTENTION_LINKS = {
    "dead_lettered": "/jobs?state=DeadLettered",
    "held": "/jobs?state=Held",
    "unknown_outcomes": "/outbox/unknown",
    "dead_workers": "/workers",
    "paused_queues": "/queues",
}
_PAST = {
    "requeue": "requeued",
    "drop": "dropped",
    "release": "released (it runs now)",
    "hold": "held (no worker takes it until it is released)",
    "run_now": "made due now",
    "abort": "asked to abort (its worker stops it at its next heartbeat)",
}
#: What an abort of a job that had not started did.
_ABORTED_AT_ONCE = "aborted: dead-lettered, it never starts (drop it to clear it)"
#: Each action's button label.
LABELS = {
    "requeue": "Requeue",
    "drop": "Drop",
    "release": "Run",
    "hold": "Hold",
    "run_now": "Run now",
    "abort": "Abort",
}
_PRIORITY_DIGITS = 10  # a 32-bit integer; longer text is refused before int() reads it


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _query(request: Request) -> JobQuery:
    return JobQuery.parse({name: request.query_params.get(name) for name in _FILTERS})


def _positive(text: str | None, what: str) -> int | None:
    if text is None or text == "":
        return None
    if not is_whole_number(text) or len(text) > 19 or not 1 <= int(text) < 2**63:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise InvalidInput(f"{what} must be a positive whole number below 2**63, not {shown!r}")
    return int(text)


def _action_name(request: Request) -> str:
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
    return action


@view
def overview(request: Request) -> Response:
    """Counts per state, throughput over the last hour, what waits for an operator."""
    console = _console(request)
    found = console.overview()
    chart = throughput_chart(found.throughput)
    transport = console.mf.deliverer.transport
    return page(
        request,
        "overview.html",
        {
            "overview": found,
            "chart": chart,
            "series": SERIES,
            "refresh": True,
            "attention_links": ATTENTION_LINKS,
            # what the paused-delivery banner names: SMTP, or the provider's transport
            "transport_label": (
                "SMTP" if transport is None or transport.name == "smtp" else transport.name
            ),
        },
    )


@view
def job_list(request: Request) -> Response:
    """Jobs newest first, filtered, paged by id."""
    console = _console(request)
    query = _query(request)
    before = _positive(request.query_params.get("before"), "before")
    found = console.jobs(query, before_id=before, limit=50)
    counts = console.mf.jobs.counts()
    return page(
        request,
        "jobs.html",
        {
            "query": query,
            "page": found,
            "counts": counts,
            "held": console.mf.jobs.held_count(),
            "before": before,
            "kinds": console.kinds(),
        },
    )


@view
def job_detail(request: Request) -> Response:
    """One job: fields, payload, result, every attempt with its traceback, the audit trail."""
    job_id = _positive(str(request.path_params["job_id"]), "job id")
    assert job_id is not None
    console = _console(request)
    detail = console.job(job_id)
    job = detail.job
    payload = pretty_json(job.payload)
    context = {
        "detail": detail,
        "job": detail.job,
        "payload": payload,
        # what the handler returned, in its own key order (None: nothing returned)
        "result": None if job.result is None else pretty_json(job.result, sort_keys=False),
        "holding": console.holding(detail.job),  # the limits that hold it back, if any
    }
    return page(request, "job.html", context)


@view
def confirm_action(request: Request) -> Response:
    """What requeue / drop / release will do to this job, and the button that does it."""
    job_id = _positive(str(request.path_params["job_id"]), "job id")
    assert job_id is not None
    action = _action_name(request)
    job = _console(request).mf.jobs.get(job_id)
    return page(request, "confirm.html", {"job": job, "action": action, "labels": LABELS})


@form_action
def do_action(request: Request, form: FormData) -> Response:
    """Perform one audited action, then show the job again."""
    job_id = _positive(str(request.path_params["job_id"]), "job id")
    assert job_id is not None
    action = _action_name(request)
    reason = form_values(form, "reason")["reason"]
    job = _console(request).act(action, job_id, actor=operator(request), reason=reason)
    done = (
        _ABORTED_AT_ONCE
        if action == "abort" and job.state is JobState.DEAD_LETTERED
        else _PAST[action]
    )
    flash(request, f"Job {job.id} {done}.")
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


def _bulk_targets(request: Request, values: dict[str, str | None], ids: list[str]) -> list[int]:
    action = values["action"] or ""
    if action not in ACTIONS:
        raise InvalidInput(f"unknown bulk action {action!r}: use {', '.join(ACTIONS)}")
    if values.get("scope") == "matching":
        query = JobQuery.parse({name: values.get(name) for name in _FILTERS})
        return _console(request).matching_ids(action, query)
    chosen = [_positive(text, "job id") for text in ids]
    if not chosen:
        raise InvalidInput("no jobs selected: tick the jobs to act on, or choose all matching")
    return [job_id for job_id in chosen if job_id is not None]


@view
def bulk_confirm(request: Request) -> Response:
    """Confirm a bulk action on the selected jobs or on every job matching the filter."""
    params = request.query_params
    values = {name: params.get(name) for name in (*_FILTERS, "action", "scope")}
    ids = _bulk_targets(request, values, params.getlist("id"))
    action = str(values["action"])
    query = JobQuery.parse({name: values.get(name) for name in _FILTERS})
    return page(
        request,
        "bulk_confirm.html",
        {
            "action": action,
            "ids": ids,
            "scope": values.get("scope") or "selected",
            "query": query,
            "target": query.with_state(ACTIONS[action]).describe(),
        },
    )


@form_action
def bulk_do(request: Request, form: FormData) -> Response:
    """Perform a confirmed bulk action; show what was done and what was refused."""
    values = form_values(form, *_FILTERS, "action", "scope", "reason")
    ids = [str(v) for v in form.getlist("id")]
    targets = _bulk_targets(request, values, ids)
    result = _console(request).bulk(
        str(values["action"]), targets, actor=operator(request), reason=values["reason"]
    )
    return page(request, "bulk_done.html", {"result": result, "past": _PAST[result.action]})


@view
def new_job_form(request: Request) -> Response:
    """The form to create a job (held unless a run-at time is given)."""
    return page(request, "new_job.html", {"kinds": _console(request).kinds(), "values": {}})


@form_action
def create_job(request: Request, form: FormData) -> Response:
    """Create the job; on bad input show the form again with the error and the values."""
    console = _console(request)
    values = form_values(form, "kind", "payload", "queue", "priority", "run_at")
    try:
        priority_text = (values["priority"] or "0").strip()
        digits = priority_text.removeprefix("-")
        if not is_whole_number(digits) or len(digits) > _PRIORITY_DIGITS:
            shown = priority_text if len(priority_text) <= 40 else priority_text[:40] + "…"
            raise InvalidInput(f"priority must be a whole number (32-bit), not {shown!r}")
        run_at = (values["run_at"] or "").strip()
        job = console.create_job(
            (values["kind"] or "").strip(),
            values["payload"] or "{}",
            queue=(values["queue"] or "").strip() or None,
            priority=int(priority_text),
            run_at=parse_instant(run_at) if run_at else None,
        )
    except InvalidInput as exc:
        return page(
            request,
            "new_job.html",
            {"kinds": console.kinds(), "values": values, "error": str(exc)},
            status_code=400,
        )
    state = "held: press Run to start it" if job.held else f"due at {job.available_at:%H:%M:%S} UTC"
    flash(request, f"Created job {job.id} ({state}).")
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


@view
def audit_log(request: Request) -> Response:
    """Every operator action, newest first."""
    before = _positive(request.query_params.get("before"), "before")
    found = _console(request).audit(before_id=before, limit=100)
    return page(request, "audit.html", {"page": found})


routes = [
    Route("/", overview, name="overview"),
    Route("/jobs", job_list, name="jobs"),
    Route("/jobs/new", new_job_form, name="new_job"),
    Route("/jobs/new", create_job, methods=["POST"], name="create_job"),
    Route("/jobs/bulk", bulk_confirm, name="bulk_confirm"),
    Route("/jobs/bulk", bulk_do, methods=["POST"], name="bulk_do"),
    Route("/jobs/{job_id:id}", job_detail, name="job"),
    Route("/jobs/{job_id:id}/{action}", confirm_action, name="confirm_action"),
    Route("/jobs/{job_id:id}/{action}", do_action, methods=["POST"], name="do_action"),
    Route("/audit", audit_log, name="audit"),
]

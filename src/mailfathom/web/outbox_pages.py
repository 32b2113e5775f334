"""Outgoing email pages: outbox list and detail (safe preview), unknown outcomes and their
resolution, cancel and record-again — each decision confirmed, reasoned and audited.

Internal.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import InvalidInput
from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.params import paging_id
from mailfathom.web.preview import preview, preview_response
from mailfathom.web.render import flash, operator, page

__all__ = ["routes"]

#: What each resolution means, shown next to its choice.
DECISIONS = [
    (
        "delivered",
        "Delivered",
        "It arrived (you saw it in the server's log or the mailbox): → Sent.",
    ),
    (
        "send_again",
        "Send again",
        "It did not arrive, or a second copy is acceptable: → Recorded, one more copy is sent.",
    ),
    ("give_up", "Give up", "Never send it: → Refused."),
]


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _email_id(request: Request) -> int:
    value = int(request.path_params["email_id"])
    if not 1 <= value < 2**63:
        raise InvalidInput(f"an email id is a positive 64-bit integer, not {value}")
    return value


@view
def outbox(request: Request) -> Response:
    """Records newest first, by stage, paged by id."""
    console = _console(request)
    stage = request.query_params.get("stage") or None
    before = paging_id(request.query_params.get("before"), "before")
    found = console.outbox(stage, before_id=before, limit=50)
    return page(
        request,
        "outbox.html",
        {
            "page": found,
            "stage": None if stage is None else OutgoingEmailStage.parse(stage).value,
            "counts": console.outbox_counts(),
            "before": before,
            "dev": request.app.state.features.inbox,
        },
    )


@view
def email_detail(request: Request) -> Response:
    """One record: envelope, per-recipient outcomes, stage history, preview, audit trail."""
    detail = _console(request).email(_email_id(request))
    return page(
        request,
        "email.html",
        {
            "detail": detail,
            "email": detail.email,
            "preview": preview(detail.raw),
            "preview_url": f"/outbox/{detail.email.id}/preview",
            "source": detail.raw.decode("utf-8", "replace"),
        },
    )


@view
def email_preview(request: Request) -> Response:
    """The record's sanitised HTML, for the sandboxed iframe."""
    detail = _console(request).email(_email_id(request))
    return preview_response(preview(detail.raw).html)


@view
def unknown(request: Request) -> Response:
    """Unknown outcomes, oldest first, 50 a page, each with its Resolve button."""
    after = paging_id(request.query_params.get("after"), "after")
    found = _console(request).unknown_outcomes(after_id=after, limit=50)
    return page(
        request,
        "unknown.html",
        {"page": found, "emails": found.emails, "after": after, "refresh": after is None},
    )


@view
def resolve_form(request: Request) -> Response:
    """The decision: delivered, send again or give up, with the reason."""
    email = _console(request).mf.outbox.get(_email_id(request))
    return page(request, "resolve.html", {"email": email, "decisions": DECISIONS, "values": {}})


@form_action
def resolve(request: Request, form: FormData) -> Response:
    """Record the operator's decision on an unknown outcome (audited)."""
    console = _console(request)
    email_id = _email_id(request)
    values = form_values(form, "decision", "reason")
    try:
        email = console.resolve_email(
            email_id, values["decision"] or "", actor=operator(request), reason=values["reason"]
        )
    except InvalidInput as exc:
        current = console.mf.outbox.get(email_id)
        context = {"email": current, "decisions": DECISIONS, "values": values, "error": str(exc)}
        return page(request, "resolve.html", context, status_code=400)
    flash(request, f"Email {email.id} resolved as {values['decision']}: now {email.stage.value}.")
    return RedirectResponse(f"/outbox/{email.id}", status_code=303)


@view
def confirm(request: Request) -> Response:
    """Confirm cancelling a Recorded email, or recording a Refused one again."""
    action = "cancel" if request.url.path.endswith("/cancel") else "record-again"
    email = _console(request).mf.outbox.get(_email_id(request))
    return page(request, "email_confirm.html", {"email": email, "action": action})


@form_action
def cancel(request: Request, form: FormData) -> Response:
    """Cancel a Recorded email."""
    reason = form_values(form, "reason")["reason"]
    email = _console(request).cancel_email(
        _email_id(request), actor=operator(request), reason=reason
    )
    if not email.parts:
        flash(request, f"Email {email.id} cancelled: it will never be sent.")
    else:
        begun = ", ".join(f"{p.id} ({p.stage.value})" for p in email.begun)
        flash(
            request,
            f"Email {email.id}: {len(email.cancelled)} of its {len(email.parts)} parts cancelled "
            "(they will never be sent)"
            + (f"; left alone, their transmission had begun: {begun}" if begun else "")
            + ".",
        )
    return RedirectResponse(f"/outbox/{email.id}", status_code=303)


@form_action
def record_again(request: Request, form: FormData) -> Response:
    """Record a Refused email's bytes again as a new message."""
    reason = form_values(form, "reason")["reason"]
    email = _console(request).record_email_again(
        _email_id(request), actor=operator(request), reason=reason
    )
    flash(request, f"Recorded again as email {email.id}; a worker delivers it.")
    return RedirectResponse(f"/outbox/{email.id}", status_code=303)


@form_action
def send_test_email(request: Request, form: FormData) -> Response:
    """``mailfathom dev``: record a test email; the worker delivers it to the dev inbox."""
    if not request.app.state.features.inbox:
        raise InvalidInput("test emails are for `mailfathom dev`, which captures them locally")
    email = _console(request).send_test_email()
    flash(request, f"Recorded test email {email.id}: watch it go Recorded → Sent.")
    return RedirectResponse(f"/outbox/{email.id}", status_code=303)


routes = [
    Route("/outbox", outbox, name="outbox"),
    Route("/outbox/test-email", send_test_email, methods=["POST"], name="test_email"),
    Route("/outbox/unknown", unknown, name="unknown"),
    Route("/outbox/{email_id:id}", email_detail, name="email"),
    Route("/outbox/{email_id:id}/preview", email_preview, name="email_preview"),
    Route("/outbox/{email_id:id}/resolve", resolve_form, name="resolve_form"),
    Route("/outbox/{email_id:id}/resolve", resolve, methods=["POST"], name="resolve"),
    Route("/outbox/{email_id:id}/cancel", confirm, name="confirm_cancel"),
    Route("/outbox/{email_id:id}/cancel", cancel, methods=["POST"], name="cancel"),
    Route("/outbox/{email_id:id}/record-again", confirm, name="confirm_record_again"),
    Route("/outbox/{email_id:id}/record-again", record_again, methods=["POST"], name="again"),
]

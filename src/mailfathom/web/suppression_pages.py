"""The suppressions page: the addresses never sent to again, searchable, with add and
lift (lift confirmed).

Internal. The list is ``mf.suppressions`` (docs/suppression.md): every add and lift is
audited with the operator as actor.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.delivery.suppressions import SUPPRESSION_REASONS
from mailfathom.errors import InvalidInput
from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.render import flash, operator, page

__all__ = ["SHOWN", "routes"]

#: Entries shown per page.
SHOWN = 100
#: The newest soft bounces shown under the list.
SOFT_SHOWN = 20


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


@view
def suppressions(request: Request) -> Response:
    """Suppressed addresses by address (``search``, ``after``), with counts by reason."""
    mf = _console(request).mf
    search = request.query_params.get("search") or None
    after = request.query_params.get("after") or None
    found = mf.suppressions.list(search=search, after=after, limit=SHOWN)
    context = {
        "entries": found,
        "search": search or "",
        "counts": mf.suppressions.counts(),
        "reasons": SUPPRESSION_REASONS,
        "next_after": found[-1].address if len(found) == SHOWN else None,
        "soft_bounces": mf.suppressions.soft_bounces(limit=SOFT_SHOWN),
        "soft_total": mf.suppressions.event_counts().get("soft_bounce", 0),
    }
    return page(request, "suppressions.html", context)


def _address(request: Request, form: FormData | None = None) -> str:
    given = form.get("address") if form is not None else request.query_params.get("address")
    if not isinstance(given, str) or not given.strip():
        raise InvalidInput("name the address: /suppressions/lift?address=<address>")
    return given


@view
def confirm_lift(request: Request) -> Response:
    """What lifting this address's suppression will do."""
    address = _address(request)
    entry = _console(request).mf.suppressions.get(address)
    return page(request, "suppression_lift.html", {"address": address, "entry": entry})


@form_action
def lift(request: Request, form: FormData) -> Response:
    """Lift the suppression (audited), then show the list."""
    address = _address(request, form)
    reason = form_values(form, "reason")["reason"] or None
    entry = _console(request).mf.suppressions.lift(address, actor=operator(request), reason=reason)
    flash(request, f"{entry.address} is no longer suppressed: deliveries send to it again.")
    return RedirectResponse("/suppressions", status_code=303)


@form_action
def add(request: Request, form: FormData) -> Response:
    """Suppress an address (audited), then show the list."""
    address = _address(request, form)
    values = form_values(form, "reason", "detail")
    entry = _console(request).mf.suppressions.add(
        address,
        actor=operator(request),
        reason=values["reason"] or "manual",
        source="console",
        detail=values["detail"] or None,
    )
    flash(request, f"{entry.address} is suppressed: no delivery sends to it.")
    return RedirectResponse("/suppressions", status_code=303)


routes = [
    Route("/suppressions", suppressions, name="suppressions"),
    Route("/suppressions", add, methods=["POST"], name="suppress_address"),
    Route("/suppressions/lift", confirm_lift, name="confirm_lift_suppression"),
    Route("/suppressions/lift", lift, methods=["POST"], name="lift_suppression"),
]

"""The limits page: each flow-control limit, how much of it is in use, its busiest keys
and the jobs waiting on it; and one limit's page with all its keys.

Internal. Read-only: limits are declared in code and written by workers at start
(``mf.limits``, docs/worker.md). The list page shows a few keys and waiting jobs per
limit; a limit's own page shows up to :data:`~mailfathom.console.limits.KEYS_PAGE` keys
and every waiting job listed (at most
:data:`~mailfathom.console.limits.WAITING_SHOWN`), so both stay small however many keys
a kind is limited by.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.web.handlers import view
from mailfathom.web.render import page

__all__ = ["KEYS_LISTED", "KEYS_PAGE", "WAITING_LISTED", "routes"]

#: Keys shown per limit on the list page.
KEYS_LISTED = 10
#: Keys shown on a limit's own page.
KEYS_PAGE = 200
#: Waiting jobs linked per limit on the list page.
WAITING_LISTED = 20


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


@view
def limits(request: Request) -> Response:
    """Every stored limit with its use, its busiest keys and the first jobs waiting on it."""
    found = _console(request).limits(keys=KEYS_LISTED)
    return page(
        request,
        "limits.html",
        {"limits": found, "waiting_listed": WAITING_LISTED, "refresh": True},
    )


@view
def limit(request: Request) -> Response:
    """One limit: its values, up to :data:`KEYS_PAGE` keys and the jobs waiting on it."""
    found = _console(request).limit(str(request.path_params["name"]), keys=KEYS_PAGE)
    context = {"limit": found, "waiting_listed": len(found["waiting"]), "refresh": True}
    return page(request, "limit.html", context)


routes = [
    Route("/limits", limits, name="limits"),
    Route("/limits/{name:path}", limit, name="limit"),
]

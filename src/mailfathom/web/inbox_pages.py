"""The dev capture inbox (``mailfathom dev``): list, message detail, safe HTML preview, clear.

Internal. Shown only when the console was started with an inbox; the preview
is served as a separate locked-down document for a sandboxed iframe.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.console import Console
from mailfathom.web.handlers import form_action, view
from mailfathom.web.preview import preview, preview_response
from mailfathom.web.render import flash, page

__all__ = ["INBOX_PAGE", "routes"]

#: Messages listed at most (the newest); the rest stay in the Maildir.
INBOX_PAGE = 100


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


@view
def inbox(request: Request) -> Response:
    """The newest captured messages (headers only: the list never parses a body)."""
    console = _console(request)
    return page(
        request,
        "inbox.html",
        {
            "messages": console.inbox_messages(limit=INBOX_PAGE),
            "total": console.inbox_count(),
            "refresh": True,
        },
    )


@view
def inbox_message(request: Request) -> Response:
    """One captured message: envelope, headers, text, HTML preview and source."""
    message = _console(request).inbox_message(str(request.path_params["key"]))
    shown = preview(message.raw)
    return page(
        request,
        "inbox_message.html",
        {
            "message": message,
            "preview": shown,
            "source": message.raw.decode("utf-8", "replace"),
        },
    )


@view
def inbox_preview(request: Request) -> Response:
    """The message's sanitised HTML, as its own document for the sandboxed iframe."""
    message = _console(request).inbox_message(str(request.path_params["key"]))
    return preview_response(preview(message.raw).html)


@form_action
def clear(request: Request, form: FormData) -> Response:
    """Delete every captured message."""
    count = _console(request).clear_inbox()
    flash(request, f"Deleted {count} captured message(s).")
    return RedirectResponse("/inbox", status_code=303)


routes = [
    Route("/inbox", inbox, name="inbox"),
    Route("/inbox/clear", clear, methods=["POST"], name="inbox_clear"),
    Route("/inbox/{key}", inbox_message, name="inbox_message"),
    Route("/inbox/{key}/preview", inbox_preview, name="inbox_preview"),
]

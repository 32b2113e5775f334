"""A safe preview of an email: its headers, its text, and its HTML made harmless.

Internal. Used by the outbox detail and the dev inbox. The HTML part is
sanitised with ammonia (nh3: no scripts, no event handlers, no forms, no
frames) and then served on its own URL with a Content-Security-Policy that
loads nothing from anywhere (``default-src 'none'``, inline styles and
``data:`` images only, and the CSP ``sandbox`` directive), inside an
``<iframe sandbox>`` on the page: tracking pixels do not load, and nothing in
the message can run or reach the console.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesHeaderParser

import nh3
from starlette.responses import Response

__all__ = ["MAX_MULTIPARTS", "PREVIEW_POLICY", "Preview", "preview", "preview_response"]

PREVIEW_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox"
)
_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"style", "align", "valign", "width", "height", "bgcolor", "color", "dir", "lang"},
    "table": {"cellpadding", "cellspacing", "border", "width", "align", "bgcolor"},
    "td": {"colspan", "rowspan", "width", "align", "valign", "bgcolor"},
    "th": {"colspan", "rowspan", "width", "align", "valign", "bgcolor"},
    "font": {"color", "face", "size"},
}
_TAGS = set(nh3.ALLOWED_TAGS) | {"font"}
#: More multipart containers than this and the message is shown by its headers alone.
MAX_MULTIPARTS = 100
_MULTIPART = re.compile(rb"^content-type:[ \t]*multipart/", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Preview:
    """What the console shows of a message."""

    headers: list[tuple[str, str]]
    text: str | None
    html: str | None
    #: Why the message could not be shown (too deeply nested, broken), else None.
    problem: str | None = None


def sanitize_html(html: str) -> str:
    """HTML with everything active removed (scripts, handlers, forms, frames, ``<style>``)."""
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto", "cid", "data"},
        link_rel="noopener noreferrer",
    )


def preview(raw: bytes) -> Preview:
    """Parse ``raw`` and pick its plain-text and (sanitised) HTML bodies.

    Fails soft: a message the parser cannot follow (MIME nested deeper than Python's
    recursion limit, a part that breaks the parser) is shown by its headers alone,
    with the reason, and its source stays available.
    """
    if len(_MULTIPART.findall(raw)) > MAX_MULTIPARTS:  # a cheap look before a costly parse
        problem = (
            f"it has more than {MAX_MULTIPARTS} multipart parts: its MIME parts are nested "
            "too deeply (or are too many) to follow"
        )
        return Preview(headers=_headers_only(raw), text=None, html=None, problem=problem)
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        headers = [(name, str(value)) for name, value in message.items()]
        return Preview(headers=headers, text=_body(message, "plain"), html=_html(message))
    except RecursionError:
        problem = "its MIME parts are nested too deeply to follow"
    except Exception as exc:  # a hostile message must not break the page
        problem = f"the email parser failed on it ({type(exc).__name__})"
    return Preview(headers=_headers_only(raw), text=None, html=None, problem=problem)


def _headers_only(raw: bytes) -> list[tuple[str, str]]:
    try:
        head = BytesHeaderParser(policy=email.policy.default).parsebytes(raw)
        return [(name, str(value)) for name, value in head.items()]
    except Exception:  # fail soft: no headers rather than no page
        return []


def _body(message: EmailMessage, subtype: str) -> str | None:
    part = message.get_body(preferencelist=(subtype,))
    if part is None or part.get_content_type() != f"text/{subtype}":
        return None
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset or a broken transfer encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return str(content)


def _html(message: EmailMessage) -> str | None:
    body = _body(message, "html")
    return None if body is None else sanitize_html(body)


def preview_response(html: str | None) -> Response:
    """The sanitised HTML as its own locked-down document, for an ``<iframe sandbox>``."""
    document = '<!doctype html><meta charset="utf-8">' + (
        html or "<p>This message has no HTML part.</p>"
    )
    return Response(
        document,
        media_type="text/html",
        headers={
            "content-security-policy": PREVIEW_POLICY,
            "x-frame-options": "SAMEORIGIN",
        },
    )

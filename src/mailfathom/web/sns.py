"""``POST /api/suppressions/sns``: Amazon SES bounces and complaints delivered by SNS.

Internal. SNS cannot send the console token, so this one API path authenticates by the
message itself: its signature must verify against an SNS signing certificate and its
topic must be one of ``sns_topic_arns`` (:mod:`mailfathom.delivery.sns`). The guard
lets it through without the token and without a JSON content type (SNS posts
``text/plain``); everything else about the console's rules is unchanged. Answers:

* 403 ``NotConfigured`` while ``sns_topic_arns`` is unset, 403 ``SignatureRefused``
  for a message that does not verify or whose topic is not allowed, 400 for a malformed
  one: nothing changes;
* 503 when the signing certificate (or a SubscribeURL) cannot be fetched: SNS retries;
* 200 with what was done: a ``SubscriptionConfirmation`` is confirmed, a
  ``Notification`` applied once per ``MessageId`` (a retry reports ``duplicate``), an
  ``UnsubscribeConfirmation`` changes nothing.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mailfathom.console import Console
from mailfathom.console.serialize import suppression_json
from mailfathom.delivery.sns import SignatureRefused, SnsFetchFailed, SnsVerifier, parse_topic_arns
from mailfathom.errors import MailFathomError
from mailfathom.web.api import api_error
from mailfathom.web.handlers import status_for

__all__ = ["SNS_PATH", "receive_sns", "verifier_for"]

#: Where SNS posts (the subscription's endpoint URL, after the console's address).
SNS_PATH = "/api/suppressions/sns"
_MOST_BYTES = 1_000_000  # SNS messages are at most 256 KB, plus the envelope
_OFF = (
    "the SNS endpoint is off: set sns_topic_arns (MAILFATHOM_SNS_TOPIC_ARNS) to the ARNs "
    "of the SNS topics that carry your SES bounce and complaint notifications"
)


def verifier_for(console: Console) -> SnsVerifier | None:
    """The verifier of the app's ``sns_topic_arns`` setting, or None when it is unset."""
    settings = getattr(console.mf, "settings", None)
    arns = parse_topic_arns(getattr(settings, "sns_topic_arns", None))
    return SnsVerifier(arns) if arns else None


async def receive_sns(request: Request) -> Response:
    """Verify one SNS message and act on it (see the module docstring)."""
    verifier: SnsVerifier | None = request.app.state.sns
    if verifier is None or not verifier.topic_arns:
        return api_error(403, "NotConfigured", _OFF)
    raw = await request.body()
    if len(raw) > _MOST_BYTES:
        return api_error(413, "TooLarge", f"an SNS message is at most {_MOST_BYTES} bytes")
    console: Console = request.app.state.console
    header = request.headers.get("x-amz-sns-message-type")
    try:
        result = await run_in_threadpool(_apply, console, verifier, raw, header)
    except SnsFetchFailed as exc:
        return api_error(503, "Unavailable", str(exc))
    except SignatureRefused as exc:
        return api_error(403, "SignatureRefused", str(exc))
    except MailFathomError as exc:
        return api_error(status_for(exc), type(exc).__name__, str(exc))
    return JSONResponse(result)


def _apply(console: Console, verifier: SnsVerifier, raw: bytes, header: str | None) -> Any:
    message = verifier.verify(raw, header)
    answer: dict[str, Any] = {"type": message.type, "topic_arn": message.topic_arn}
    if message.type == "SubscriptionConfirmation":
        verifier.confirm(message)
        return {**answer, "confirmed": True}
    if message.type != "Notification":
        return {**answer, "ignored": True}
    report = console.mf.suppressions.ingest_ses(
        message.message, receipt=f"sns:{message.message_id}", actor="sns"
    )
    return {
        **answer,
        "message_id": message.message_id,
        "notification_type": report.notification_type,
        "suppressed": [suppression_json(e) for e in report.suppressed],
        "soft": list(report.soft),
        "duplicate": report.duplicate,
    }

"""A transport to Amazon SES: SES v2's ``SendEmail`` with the raw message, through boto3.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

The same crash discipline as SMTP and :mod:`mailfathom.delivery.http_json`: everything
that can fail without anything going out (building the request, finding credentials,
signing) happens first, then TransmissionBegun is committed (``submission.begin()``,
from botocore's ``before-send`` event: the request is signed and about to be handed to
the HTTP connection), and only then does the request go out. SES's answer decides:

- 200 with a ``MessageId`` → Sent, SES's message id kept in the record's reply;
- ``TooManyRequestsException``, ``Throttling``, ``LimitExceededException``, any 429 or
  5xx → Recorded again and retried, after the ``Retry-After`` SES gave, else after the
  delivery backoff;
- ``AccountSuspendedException``, ``SendingPausedException``, a configuration set SES
  does not know (``NotFoundException``), refused credentials (``AccessDenied``,
  ``UnrecognizedClientException``, ``SignatureDoesNotMatch`` …, any 401 or 403), and
  no credentials at all, are a configuration to fix, not the message's fault:
  delivery pauses (``Outcome.configuration``), spending no message's attempt;
- ``MessageRejected``, ``MailFromDomainNotVerifiedException`` and any other 4xx →
  Refused, with SES's reason;
- a timeout, a connection lost or an answer that is no HTTP after the request went out
  (``ReadTimeoutError``, ``ConnectionClosedError`` …) → unknown outcome: the record
  stays TransmissionBegun for an operator, exactly as after SMTP's final dot.

SES takes at most 50 recipients a request (``max_recipients``). A record owing more is
handled as an SMTP server's "452 too many recipients" is: the request goes to the first
``max_recipients`` owed recipients, the others get a 452 reply ("not offered") and, once
SES accepted, are split off into a new Recorded part of the same message (same bytes,
same Message-ID) that is delivered later, as recipients an HTTP provider deferred are
(:mod:`mailfathom.delivery.http_recipients`). When SES does not accept the request,
its answer decides for the whole record, as listed above.

boto3 opens its connection lazily, inside the send, after ``before-send``: so a host
that cannot be reached (``EndpointConnectionError``, ``ConnectTimeoutError``: no byte of
the request left) is known only after TransmissionBegun was committed. It is retried
all the same (TransmissionBegun → Recorded, as for a 429), and the record keeps the
conservative evidence of that begin: its ``body_transmissions`` counts one more, so it
can no longer be cancelled (only given up) and no longer expires. Nothing is ever
retried once a byte of the request may have left.

botocore's own retries are disabled (one attempt per call): botocore resends a request
whose connection was lost after it went out, and SES has no idempotency key, so its
resend would be a second message (and a lost answer would not be reported as an
unknown outcome). For the same reason an unknown outcome resolved with ``send_again``
may be delivered twice: look at SES's sending events first.

The phase hook (:mod:`mailfathom.delivery.phases`, a test seam) is told ``after_354``
once the request is signed and TransmissionBegun is about to be saved, ``after_begun``
right before the request is handed to the connection, and ``after_reply`` once SES
answered.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailfathom.delivery.http_json import retry_after_seconds
from mailfathom.delivery.smtp import Outcome, Phase, Reply
from mailfathom.delivery.transport import Submission
from mailfathom.errors import ConfigurationError
from mailfathom.store.outbox.rows import RecipientReply

if TYPE_CHECKING:
    import boto3
    from botocore.exceptions import ClientError
    from mypy_boto3_sesv2 import SESV2Client

__all__ = ["SesTransport"]

#: The reply a recipient past ``max_recipients`` gets (SMTP's "452 too many
#: recipients", RFC 5321 §4.5.3.1.10): owed still, split off and sent later.
_TOO_MANY_RECIPIENTS = 452

#: SES error codes that say the account, its credentials or this transport's settings
#: stop every message, not this one: delivery pauses until they are fixed.
_CONFIGURATION_CODES = frozenset(
    {
        "AccountSuspendedException",
        "SendingPausedException",
        "NotFoundException",
        "AccessDenied",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
#: SES error codes that say "not now": nothing was delivered, try later.
_RETRIED_CODES = frozenset(
    {
        "TooManyRequestsException",
        "Throttling",
        "ThrottlingException",
        "LimitExceededException",
        "ServiceUnavailable",
        "InternalFailure",
    }
)


class _Withdrawn(Exception):
    """``begin()`` returned False inside ``before-send``: the request must not go out."""


@dataclass
class _Attempt:
    """The submission the current thread is sending, and whether it got past begin()."""

    submission: Submission
    begun: bool = False


class SesTransport:
    """Sends each message with SES v2's ``SendEmail`` (``Content.Raw``: the frozen bytes
    as they are; the envelope recipients as ``Destination``) in ``region``.

    Credentials come from boto3's usual chain (environment, profile, instance role),
    or from ``session`` (a ``boto3.Session``), or from the keys given here.
    ``endpoint_url`` replaces SES's own (a VPC endpoint, a local stand-in);
    ``configuration_set`` names the SES configuration set that tracks the messages.
    ``timeout`` bounds the wait for SES's answer and ``connect_timeout`` the connect,
    in seconds; at most ``connections`` connections are kept. One request names at most
    ``max_recipients`` recipients (SES's limit: 50); a record owing more sends to the
    first ones and the rest are delivered later by a new part of the message.

    Requires the ``ses`` extra (``pip install 'mailfathom[ses]'``: boto3).
    """

    def __init__(
        self,
        region: str,
        *,
        endpoint_url: str | None = None,
        configuration_set: str | None = None,
        session: boto3.Session | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        profile_name: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        connections: int = 16,
        max_recipients: int = 50,
        name: str = "ses",
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0 or connections < 1:
            raise ConfigurationError(
                "timeout and connect_timeout must be above 0 and connections at least 1"
            )
        if max_recipients < 1:
            raise ConfigurationError("max_recipients must be at least 1")
        try:  # here, not at the top: boto3 is optional (the ses extra)
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise ConfigurationError(
                "SesTransport needs boto3: install it with pip install 'mailfathom[ses]'"
            ) from exc
        if session is None:
            session = boto3.Session(
                aws_access_key_id=aws_access_key_id,
                aws_secret_access_key=aws_secret_access_key,
                aws_session_token=aws_session_token,
                profile_name=profile_name,
                region_name=region,
            )
        config = Config(
            # One attempt, never botocore's retries: botocore resends a request whose
            # connection was lost after it went out (ConnectionClosedError, a read
            # timeout), and SES has no idempotency key, so a resend is a duplicate
            # message. (Its resend would call begin() again, which refuses a record no
            # longer Recorded, so the lost answer would be misread as "withdrawn"
            # instead of reported as an unknown outcome.) Retrying is the delivery
            # job's business, after the record says what happened.
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=connect_timeout,
            read_timeout=timeout,
            max_pool_connections=connections,
            user_agent_extra="mailfathom",
        )
        self.name = name
        #: The AWS region messages are sent in.
        self.region = region
        self.configuration_set = configuration_set
        #: The most recipients one request names (SES takes at most 50).
        self.max_recipients = max_recipients
        self._client: SESV2Client = session.client(
            "sesv2", region_name=region, endpoint_url=endpoint_url, config=config
        )
        self._client.meta.events.register("before-send.sesv2.SendEmail", self._before_send)
        self._current = threading.local()

    def close(self) -> None:
        """Close the kept connections."""
        self._client.close()

    def submit(self, submission: Submission) -> Outcome:
        """One ``SendEmail`` for one record; see the module docstring for what each
        answer means."""
        # here, not at the top: botocore comes with boto3, optional (the ses extra)
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        attempt = _Attempt(submission)
        self._current.attempt = attempt
        offered = list(submission.recipients[: self.max_recipients])
        left = list(submission.recipients[self.max_recipients :])
        try:
            response = self._client.send_email(**self._request(submission, offered))
        except _Withdrawn:
            return Outcome(
                "withdrawn",
                "the record moved on (cancelled) before the request: nothing was sent",
                Phase.DATA,
            )
        except ClientError as exc:
            submission.on_phase("after_reply")
            return self._answered_error(submission, exc, began=attempt.begun)
        except (NoCredentialsError, PartialCredentialsError) as exc:
            fix = f"{self.name} has no usable AWS credentials ({_describe(exc)}): configure them"
            return Outcome("retry", fix, Phase.CONNECT, configuration=fix)
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            # The connection was never made: no byte of the request left.
            return Outcome(
                "retry",
                f"could not connect to {self.name} ({_describe(exc)}): nothing was sent",
                Phase.REPLY if attempt.begun else Phase.CONNECT,
            )
        except BotoCoreError as exc:
            if not attempt.begun:
                return Outcome(
                    "retry",
                    f"the request to {self.name} was not sent ({_describe(exc)})",
                    Phase.CONNECT,
                )
            return Outcome(
                "unknown",
                f"the request to {self.name} went out and no answer came ({_describe(exc)})",
                Phase.REPLY,
            )
        finally:
            self._current.attempt = None
        submission.on_phase("after_reply")
        found = response.get("MessageId")
        text = f"accepted by {self.name}" + (f", message id {found}" if found else "")
        now = submission.clock.now()
        replies = [RecipientReply(p, 250, None, text, now) for p, _ in offered]
        over = (
            f"not offered: {self.name} takes at most {self.max_recipients} recipients a "
            "request (sent later)"
        )
        replies += [RecipientReply(p, _TOO_MANY_RECIPIENTS, None, over, now) for p, _ in left]
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 200)
        return Outcome(
            "sent",
            text,
            Phase.REPLY,
            Reply(status, None, text),
            recipients=replies,
            deferred=[p for p, _ in left],
        )

    def _request(self, submission: Submission, offered: list[tuple[int, str]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "FromEmailAddress": submission.sender,
            "Destination": {"ToAddresses": [address for _, address in offered]},
            "Content": {"Raw": {"Data": submission.data}},
        }
        if self.configuration_set is not None:
            request["ConfigurationSetName"] = self.configuration_set
        return request

    def _before_send(self, **_: Any) -> None:
        """botocore's ``before-send``: the request is built and signed, nothing has left.
        Commit TransmissionBegun now, or stop the request when the record moved on."""
        attempt: _Attempt | None = getattr(self._current, "attempt", None)
        if attempt is None:
            return
        attempt.submission.on_phase("after_354")
        if not attempt.submission.begin():
            raise _Withdrawn
        attempt.begun = True
        attempt.submission.on_phase("after_begun")

    def _answered_error(self, submission: Submission, exc: ClientError, *, began: bool) -> Outcome:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "")) or "(no code)"
        said = " ".join(str(error.get("Message", "")).split())[:500] or "(no message)"
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 0))
        reply = Reply(status, None, f"{self.name} answered HTTP {status} {code}: {said}"[:2000])
        phase = Phase.REPLY if began else Phase.CONNECT
        if code in _CONFIGURATION_CODES or status in (401, 403):
            fix = (
                f"{reply.text}: fix the AWS credentials or settings given to the transport, "
                "or the SES account"
            )
            return Outcome("retry", fix, phase, reply, configuration=fix)
        if code in _RETRIED_CODES or status == 429 or status >= 500:
            headers = meta.get("HTTPHeaders", {})
            wait = retry_after_seconds(headers.get("retry-after"), submission)
            reason = reply.text + (f" (retry after {wait:g} s)" if wait is not None else "")
            return Outcome("retry", reason, phase, reply, retry_after=wait)
        if 400 <= status < 500:
            return Outcome("refused", reply.text, phase, reply)
        return Outcome("unknown", reply.text, Phase.REPLY, reply)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

"""A transport to an HTTP email API that takes the raw message as JSON.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

The same crash discipline as SMTP, over HTTP: the connection is opened first (a
failure there sent nothing: retried), then TransmissionBegun is committed
(``submission.begin()``), and only then does the request go out. The answer decides:

- 2xx → Sent, with the provider's message id (``{"id": …}``) kept in the record's reply;
  when the answer also lists per-recipient results
  (``{"recipients": [{"address": …, "status": "accepted" | "rejected" | "deferred",
  "reason": …}]}``), each recipient gets its own, as RCPT TO gives them over SMTP:
  accepted is a 250 for it, rejected a 550 with the provider's reason (never offered
  again), deferred a 450 (split off into a new Recorded record when others were
  accepted, as a 4xx RCPT is). A recipient the list leaves out, or gives another
  status, is accepted: the 2xx covers it. None accepted: every one rejected →
  Refused; some deferred → Recorded again, retried;
- 429 and 5xx → Recorded again and retried, after the ``Retry-After`` the provider
  gave (seconds or an HTTP date), else after the delivery backoff; so are 408 and 409;
- 401 and 403 (an API key the provider refuses, an account it suspended) are a
  configuration to fix, not the message's fault: the outcome carries what to fix
  (``Outcome.configuration``) and delivery pauses as for SMTP's refused password,
  spending no message's attempt, until the provider accepts again;
- any other 4xx → Refused, with the provider's reason (``{"message": …}`` or the body);
- a timeout, a connection lost or an answer that is no HTTP after the request went
  out → unknown outcome: the record stays TransmissionBegun for an operator, exactly
  as after SMTP's final dot.

Each request carries an ``Idempotency-Key`` made of the record's id and Message-ID:
a provider that honours it (Resend does) accepts a "send again" of the same record at
most once, so an unknown outcome can be resolved with ``send_again`` safely there.

The phase hook (:mod:`mailfathom.delivery.phases`, a test seam) is told
``after_354`` once the connection is open and TransmissionBegun is about to be saved,
``after_begun``, ``after_body`` once the request is sent, and ``after_reply``.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import ssl
import threading
from dataclasses import replace
from datetime import UTC
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from mailfathom.delivery.http_recipients import per_recipient
from mailfathom.delivery.smtp import Outcome, Phase, Reply
from mailfathom.delivery.transport import Submission
from mailfathom.errors import ConfigurationError
from mailfathom.observability import tracing
from mailfathom.observability.hooks import submission_ended, traced_phases
from mailfathom.testsignal import TestSignal

__all__ = ["HttpJsonTransport", "idempotency_key", "retry_after_seconds"]

#: HTTP answers that are retried although they are 4xx.
_RETRIED_4XX = frozenset({408, 409, 429})
#: HTTP answers that say the transport's configuration (its API key, the account) is refused.
_CONFIGURATION = frozenset({401, 403})


def idempotency_key(submission: Submission) -> str:
    """The ``Idempotency-Key`` of a record: the same for every attempt of that record
    until the provider answers for a recipient (a request repeated after a lost answer,
    a "send again", carries the same key), a new one for the attempt after such an
    answer (the recipients it deferred are asked for anew), and different for every
    other record (a split part, a record recorded again)."""
    seed = submission.message_id
    if submission.answered_at is not None:
        seed += "\n" + submission.answered_at.isoformat()
    digest = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:16]
    return f"mailfathom-{submission.email_id}-{digest}"


class HttpJsonTransport:
    """POSTs each message to ``url`` as ``{"from", "to", "raw"}`` (``raw``: the frozen
    bytes in base64), with ``Authorization: Bearer <api_key>`` when a key is given and
    an ``Idempotency-Key``; at most ``connections`` requests at once in this process (a
    delivering thread beyond that waits for one to end, as for ``smtp_sessions``).
    ``timeout`` bounds the connect and the wait for the answer, in seconds. Each request
    is traced as a ``<name> submission`` span and counted with ``transport=<name>``."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        connections: int = 16,
        name: str = "http-json",
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"the provider URL {url!r} is not usable: give https://host/path "
                "(http:// only for a server on this machine)"
            )
        if timeout <= 0 or connections < 1:
            raise ConfigurationError("timeout must be above 0 and connections at least 1")
        self.name = name
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._api_key = api_key
        self._timeout = timeout
        #: Requests in flight at most (the ``smtp_sessions`` of this transport).
        self.connections = connections
        self._slots = threading.BoundedSemaphore(connections)
        #: Signalled with the record's id when a submission waits for a free connection.
        self.waiting: TestSignal[int] = TestSignal("http.waiting")

    def close(self) -> None:
        """Nothing is kept open between requests."""

    def submit(self, submission: Submission) -> Outcome:
        """One request for one record; see the module docstring for what each answer means.
        Waits while ``connections`` requests are in flight (saying so on ``waiting``)."""
        if not self._slots.acquire(blocking=False):
            self.waiting.signal(submission.email_id)
            self._slots.acquire()
        try:
            with tracing.span(
                f"{self.name} submission",
                **{"mailfathom.email.id": submission.email_id, "mailfathom.transport": self.name},
            ) as span:
                if span is not None:
                    submission = replace(
                        submission, on_phase=traced_phases(span, submission.on_phase)
                    )
                connection = self._connection()
                try:
                    outcome = self._submit(connection, submission)
                finally:
                    connection.close()
                submission_ended(outcome, span, self.name, http=True)
            return outcome
        finally:
            self._slots.release()

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host,
                self._port,
                timeout=self._timeout,
                context=ssl.create_default_context(),
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def _submit(self, connection: http.client.HTTPConnection, submission: Submission) -> Outcome:
        try:
            connection.connect()
        except OSError as exc:
            return Outcome(
                "retry",
                f"could not connect to {self.name} at {self._host} ({_describe(exc)}): "
                "nothing was sent",
                Phase.CONNECT,
            )
        body = json.dumps(
            {
                "from": submission.sender,
                "to": [address for _, address in submission.recipients],
                "raw": base64.b64encode(submission.data).decode("ascii"),
            }
        ).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key(submission),
            "User-Agent": "mailfathom",
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        submission.on_phase("after_354")
        if not submission.begin():
            return Outcome(
                "withdrawn",
                "the record moved on (cancelled) before the request: nothing was sent",
                Phase.DATA,
            )
        submission.on_phase("after_begun")
        try:
            connection.request("POST", self._path, body=body, headers=headers)
            submission.on_phase("after_body")
            response = connection.getresponse()
            status = response.status
            answer = response.read(65536)
            retry_after = response.getheader("Retry-After")
        except (OSError, http.client.HTTPException) as exc:
            return Outcome(
                "unknown",
                f"the request to {self.name} went out and no answer came ({_describe(exc)})",
                Phase.REPLY,
            )
        submission.on_phase("after_reply")
        return self._answered(submission, status, answer, retry_after)

    def _answered(
        self, submission: Submission, status: int, answer: bytes, retry_after: str | None
    ) -> Outcome:
        said = _said(answer)
        if 200 <= status < 300:
            found = _field(answer, "id")
            text = f"accepted by {self.name}" + (f", message id {found}" if found else "")
            return per_recipient(self.name, submission, status, text, answer)
        reply = Reply(status, None, f"{self.name} answered HTTP {status}: {said}"[:2000])
        if status in _CONFIGURATION:
            fix = (
                f"{reply.text}: fix the API key given to the transport, or the account at "
                "the provider"
            )
            return Outcome("retry", fix, Phase.REPLY, reply, configuration=fix)
        if status == 429 or status >= 500 or status in _RETRIED_4XX:
            wait = retry_after_seconds(retry_after, submission)
            reason = reply.text + (f" (retry after {wait:g} s)" if wait is not None else "")
            return Outcome("retry", reason, Phase.REPLY, reply, retry_after=wait)
        if 400 <= status < 500:
            return Outcome("refused", reply.text, Phase.REPLY, reply)
        return Outcome("unknown", reply.text, Phase.REPLY, reply)


def _said(answer: bytes) -> str:
    """The provider's reason: ``message`` (or ``error``) of a JSON body, else the text."""
    for key in ("message", "error"):
        found = _field(answer, key)
        if found:
            return found
    return " ".join(answer.decode("utf-8", "replace").split())[:500] or "(no body)"


def _field(answer: bytes, key: str) -> str | None:
    try:
        parsed = json.loads(answer)
    except ValueError:
        return None
    value = parsed.get(key) if isinstance(parsed, dict) else None
    return None if value is None else str(value)[:500]


def retry_after_seconds(value: str | None, submission: Submission) -> float | None:
    """``Retry-After`` in seconds from now (RFC 9110 §10.2.3: seconds or an HTTP date)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - submission.clock.now()).total_seconds(), 0.0)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

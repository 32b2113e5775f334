"""SMTP configuration errors: told apart from outages, remembered, and probed slowly.

Internal. A wrong password (AUTH 535), credentials that would go to a server that
offers no STARTTLS or no AUTH, a server that requires an authentication the URL
does not give (530), a certificate that does not verify: no retry fixes these, only
a change of the configuration (or of the server's). Spending each message's
attempts on them would refuse every message after a day of retries, so the
deliverer (:mod:`mailfathom.delivery.deliver`) pauses instead:

- :func:`session_problem` and :func:`outcome_problem` say whether a failure is a
  configuration error, and what to fix;
- a :class:`ConfigurationGate` remembers the error for the process: one log line
  when it starts and one when it ends; while it lasts, at most one delivery per
  ``retry`` seconds tries the server (a probe), and every other one waits without
  spending an attempt (its message stays Recorded, its count unchanged);
- :func:`probe` tries a server the way a delivery starts (connect, EHLO, STARTTLS,
  AUTH, then ``MAIL FROM:<>`` and ``RSET``), for ``mailfathom health`` and the
  console, which deliver nothing themselves.
"""

from __future__ import annotations

import smtplib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mailfathom.delivery.smtp import Outcome, Phase, Reply, SessionFailure, SmtpSession
from mailfathom.delivery.smtp_url import SmtpTarget, parse_smtp_url

__all__ = [
    "CONFIG_RETRY",
    "PROBE_WAIT",
    "ConfigurationFault",
    "ConfigurationGate",
    "SmtpCheck",
    "outcome_problem",
    "probe",
    "session_problem",
    "smtp_probe",
]

#: Seconds between two tries of a server that answered with a configuration error.
CONFIG_RETRY = 300.0
#: Seconds a delivery waits while another one tries the server: if that try gets
#: through, every waiting message goes soon after, not a whole ``retry`` later.
PROBE_WAIT = 5.0
#: Replies that say the credentials, or their absence, are the problem (RFC 4954 §6).
_AUTH_CODES = {
    530: "authentication required",
    534: "mechanism too weak",
    535: "credentials invalid",
    538: "encryption required for the mechanism",
}


def session_problem(failure: SessionFailure) -> str | None:
    """What to fix when ``failure`` (no session could be set up) is a configuration
    error; None when it may be an outage (connection refused, timeout, 4xx, a hang-up)."""
    cause = failure.__cause__
    reply = failure.reply
    if failure.phase is Phase.AUTH:
        if reply is not None and reply.permanent:
            return _auth_fix(reply)
        if reply is None and not isinstance(cause, (smtplib.SMTPServerDisconnected, OSError)):
            return f"{failure}: fix smtp_url (MAILFATHOM_SMTP_URL) or the server"
        if isinstance(cause, smtplib.SMTPException) and not isinstance(
            cause, (smtplib.SMTPServerDisconnected, smtplib.SMTPResponseException)
        ):  # smtplib found no authentication mechanism it shares with the server
            return f"{failure}: the server offers no mechanism smtplib can use; fix the server"
    if failure.phase is Phase.STARTTLS:
        if cause is None:
            return f"{failure}: use a server that offers STARTTLS, or smtps://"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"{failure}: the server's certificate does not verify; fix its certificate, "
                "or the host name in smtp_url"
            )
    return None


def outcome_problem(outcome: Outcome) -> str | None:
    """What to fix when a mail transaction was answered "authentication required"
    (530) before its body: the server takes no mail from this client as configured."""
    if outcome.kind not in ("refused", "retry") or outcome.phase in (Phase.BODY, Phase.REPLY):
        return None
    replies = [outcome.reply] if outcome.reply is not None else []
    if not replies and outcome.recipients:
        codes = {r.code for r in outcome.recipients}
        if codes == {530}:
            first = outcome.recipients[0]
            replies = [Reply(first.code, first.enhanced_status, first.text)]
    if replies and replies[0].code == 530:
        return _auth_fix(replies[0])
    return None


def _auth_fix(reply: Reply) -> str:
    meaning = _AUTH_CODES.get(reply.code or 0, "authentication refused")
    if reply.code == 530:
        fix = "put the user name and password the server expects in smtp_url"
    elif reply.code == 538:
        fix = "use smtps:// or a server that offers STARTTLS"
    else:
        fix = "fix the user name and password in smtp_url (MAILFATHOM_SMTP_URL)"
    return f"the SMTP server answered {reply} ({meaning}): {fix}"


@dataclass(frozen=True, slots=True)
class ConfigurationFault:
    """A configuration error in force: what to fix, and since when (Unix seconds)."""

    problem: str
    since: float


class ConfigurationGate:
    """One process's view of its SMTP server's configuration, shared by its delivery
    threads: open (deliver) until a configuration error is seen, then closed to every
    delivery but one probe per ``retry`` seconds, until a probe gets through.

    ``now``: Unix seconds (the app's clock, so that a test's clock moves it).
    """

    def __init__(self, *, retry: float = CONFIG_RETRY, now: Callable[[], float] = time.time):
        self.retry = retry
        self._now = now
        self._lock = threading.Lock()
        self._fault: ConfigurationFault | None = None
        self._next_try = float("-inf")
        self._probe_ends = float("-inf")

    @property
    def fault(self) -> ConfigurationFault | None:
        """The configuration error in force, or None."""
        return self._fault

    def may_try(self) -> bool:
        """True when a delivery may talk to the server: always without a fault; with
        one, once per ``retry`` seconds (this call takes that turn)."""
        with self._lock:
            if self._fault is None:
                return True
            now = self._now()
            if now < self._next_try:
                return False
            self._next_try = now + self.retry
            self._probe_ends = now + PROBE_WAIT
            return True

    def wait(self) -> float:
        """Seconds a delivery that may not try waits: a few while another one tries the
        server (it may get through), else until the next turn."""
        with self._lock:
            now = self._now()
            if now < self._probe_ends:
                return min(PROBE_WAIT, self.retry)
            return max(self._next_try - now, min(PROBE_WAIT, self.retry))

    def failed(self, problem: str) -> bool:
        """A configuration error was seen; True when it is news (log it then)."""
        with self._lock:
            self._next_try = self._now() + self.retry
            self._probe_ends = float("-inf")
            news = self._fault is None or self._fault.problem != problem
            if news:
                self._fault = ConfigurationFault(problem, self._now())
            return news

    def passed(self) -> ConfigurationFault | None:
        """The server took a transaction's envelope: the fault that ended (log it), or None."""
        with self._lock:
            ended, self._fault = self._fault, None
            return ended


class SmtpCheck:
    """The SMTP configuration error in force, for a process that may not deliver (the
    console): the one its own deliveries met, else what :func:`probe` found, probing
    at most once per ``every`` seconds (a login per page view would lock accounts)."""

    def __init__(
        self,
        target: SmtpTarget,
        gate: ConfigurationGate,
        *,
        timeout: float = 10.0,
        every: float = 60.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._target = target
        self._gate = gate
        self._timeout = timeout
        self.every = every
        self._now = now
        self._lock = threading.Lock()
        self._found: str | None = None
        self._next = float("-inf")

    def problem(self) -> str | None:
        """What to fix, or None."""
        fault = self._gate.fault
        if fault is not None:
            return fault.problem
        with self._lock:
            if self._now() >= self._next:
                self._found = probe(self._target, timeout=self._timeout)
                self._next = self._now() + self.every
            return self._found


def probe(target: SmtpTarget, *, timeout: float) -> str | None:
    """Try ``target`` as a delivery would, sending no message: what to fix when it
    answers with a configuration error, else None (it works, or it is unreachable:
    an outage, which deliveries ride out)."""
    try:
        session = SmtpSession.open(target, timeout=timeout, data_timeout=timeout)
    except SessionFailure as exc:
        return session_problem(exc)
    try:
        reply = session.probe_sender()
    finally:
        session.close()
    if reply is not None and reply.code == 530:
        return _auth_fix(reply)
    return None


def smtp_probe(smtp_url: str, *, timeout: float = 10.0) -> Callable[[], str | None]:
    """The ``smtp`` check of a process that delivers nothing (``mailfathom health``): a
    call that tries the server at ``smtp_url`` and returns the configuration problem it
    met, or None (:func:`probe`)."""
    target = parse_smtp_url(smtp_url)
    return lambda: probe(target, timeout=timeout)

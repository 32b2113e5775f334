"""The ``mailfathom.deliver`` job: one delivery attempt of one recorded email.

Internal. Every step is written before the next one is taken:

1. ``begin_attempt`` — only a Recorded record is attempted (counted); a record
   found in TransmissionBegun is an **unknown outcome**: the job dead-letters
   with that reason and never sends. On PostgreSQL the claim that leased the job
   has usually counted the attempt already, in its own transaction
   (``claimed_start``), under the same condition.
2. the staged submission by the transport (:mod:`mailfathom.delivery.transport`; for
   SMTP :mod:`mailfathom.delivery.smtp`), which calls back right before the bytes leave
   (for SMTP: between the 354 and the body) to commit TransmissionBegun — conditional on the
   record still being Recorded at this attempt, so a cancel that won is obeyed, and
   on its expiry not having passed (no body starts after ``expires_at``; the record
   is then Refused, "expired").
3. the answer, written only if the record is still where the attempt left it.

Transient failures return the record to Recorded and retry with backoff; on the
job's last attempt the record becomes Refused instead. A configuration error (a
refused password, credentials with nowhere safe to go, "authentication required":
:mod:`mailfathom.delivery.smtp_config`; a provider's 401 or 403 to an API key, which
the transport says in ``Outcome.configuration``) is no transient failure: the attempt is taken
back (the record stays Recorded, its count unchanged) and the job snoozes, and the
process tries the server once per ``config_retry`` seconds until it gets through.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import NoReturn

from mailfathom.clock import Clock
from mailfathom.delivery.phases import PhaseHook, no_phase_hook
from mailfathom.delivery.smtp import Outcome, Phase, Reply, SessionFailure
from mailfathom.delivery.smtp_config import (
    CONFIG_RETRY,
    ConfigurationGate,
    outcome_problem,
    session_problem,
)
from mailfathom.delivery.smtp_url import SmtpTarget
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.delivery.suppressions import Suppressions, address_key
from mailfathom.delivery.transport import SmtpTransport, Submission, Transport
from mailfathom.errors import StoreError
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.failures import PermanentFailure, Snooze, TransientFailure
from mailfathom.jobs.retry import Backoff
from mailfathom.observability.logs import log_fields
from mailfathom.store.outbox.protocol import OutboxAttemptsStore, OutboxRecordsStore
from mailfathom.store.outbox.rows import (
    AttemptEnd,
    AttemptStart,
    DeliveryJobSpec,
    EmailRow,
    RecipientReply,
)

__all__ = ["DELIVERY_BACKOFF", "DELIVER_KIND", "Deliverer", "unknown_outcome_reason"]

DELIVER_KIND = "mailfathom.deliver"
#: Retries after transient failures: first within a minute, then up to an hour apart.
DELIVERY_BACKOFF = Backoff(base=timedelta(minutes=1), cap=timedelta(hours=1))

logger = logging.getLogger(__name__)
#: The longest wait a snooze takes (a year): ``smtp_config_retry`` beyond it waits that.
_LONGEST_SNOOZE = 366 * 86400.0

_RECORDED = OutgoingEmailStage.RECORDED.value
_BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN.value
_SENT = OutgoingEmailStage.SENT.value
_REFUSED = OutgoingEmailStage.REFUSED.value
_NO_SERVER = (
    "no SMTP server configured: set smtp_url (MAILFATHOM_SMTP_URL) to smtp://host:port or "
    "smtps://host:port, or pass a transport: MailFathom(transport=...)"
)


def unknown_outcome_reason(email: EmailRow) -> str:
    """Why a delivery job stops on a TransmissionBegun record, and what to do about it."""
    began = email["transmission_begun_at"]
    return (
        f"unknown outcome: outgoing email {email['id']} ({email['message_id']}) went into "
        f"transmission at {began.isoformat() if began else 'an unknown time'} and no answer "
        "was recorded, so it may or may not have been delivered; it is never re-sent "
        f"automatically: resolve it with mf.outbox.resolve({email['id']}, 'delivered' | "
        "'send_again' | 'give_up', actor=...)"
    )


class Deliverer:
    """Runs delivery attempts through one transport: ``transport`` when given, else the
    SMTP server ``target`` (or none configured), on up to ``sessions`` SMTP connections
    in parallel (one per delivering thread).

    ``on_phase`` is told each point of every submission (:mod:`mailfathom.delivery.phases`);
    it does nothing unless a test replaces it, before the worker starts.
    """

    def __init__(
        self,
        store: OutboxAttemptsStore,
        records: OutboxRecordsStore,
        clock: Clock,
        *,
        target: SmtpTarget | None,
        job: DeliveryJobSpec,
        timeout: float,
        data_timeout: float,
        sessions: int = 16,
        backoff: Backoff = DELIVERY_BACKOFF,
        on_phase: PhaseHook = no_phase_hook,
        config_retry: float = CONFIG_RETRY,
        snooze_limit: int = 100,
        transport: Transport | None = None,
        suppressions: Suppressions | None = None,
    ) -> None:
        self.on_phase = on_phase
        #: This process's transport configuration errors (SMTP's or a provider's:
        #: :mod:`mailfathom.delivery.smtp_config`).
        self.gate = ConfigurationGate(retry=config_retry, now=lambda: clock.now().timestamp())
        self._snooze_limit = snooze_limit
        self._store = store
        self._records = records
        self._clock = clock
        self._job = job
        self._backoff = backoff
        #: The SMTP server deliveries go to (None: none configured).
        self.target = target
        if transport is None and target is not None:
            transport = SmtpTransport(
                target, timeout=timeout, data_timeout=data_timeout, sessions=sessions
            )
        #: What submits the frozen bytes (None: nothing configured, deliveries wait).
        self.transport = transport
        #: The addresses never sent to (None: no list is consulted).
        self._suppressions = suppressions

    def problem(self) -> str | None:
        """What to fix in the transport's configuration (SMTP's, or a provider's API key),
        while an error pauses delivery here."""
        fault = self.gate.fault
        return None if fault is None else fault.problem

    def close(self) -> None:
        """Close the transport's idle connections."""
        if self.transport is not None:
            self.transport.close()

    def handle(self, ctx: JobContext, email_id: int) -> None:
        """The job handler: one attempt at delivering record ``email_id``."""
        start = self._store.claimed_start(ctx.job.id, ctx.job.attempts)
        current = None
        # An attempt counted by a worker's claim runs under that worker, which records the
        # job's outcome: a Sent can be written with it (see _end).
        claimed = start is not None and start.email["id"] == email_id
        if not claimed:
            start, current = self._store.begin_attempt(email_id, now=self._clock.now())
        if start is None:
            if current is None:
                raise PermanentFailure(f"no outgoing email has id {email_id}: nothing to send")
            if current["stage"] == _RECORDED:  # not begun: it is past its expiry
                expired = self._store.expire_email(email_id, now=self._clock.now())
                logger.info(
                    "outgoing email %s %s",
                    email_id,
                    "expired before it was sent: Refused" if expired else "was not attempted",
                    extra=log_fields(
                        "email_expired" if expired else "email_not_attempted", email_id=email_id
                    ),
                )
                if expired is None:  # it moved on meanwhile: let the job look again
                    raise TransientFailure(f"outgoing email {email_id} changed; trying again")
                return
            if current["stage"] == _BEGUN:
                raise PermanentFailure(unknown_outcome_reason(current))
            logger.info(
                "outgoing email %s is %s: nothing to send",
                email_id,
                current["stage"],
                extra=log_fields(
                    "email_nothing_to_send", email_id=email_id, stage=current["stage"]
                ),
            )
            return
        start, suppressed = self._leave_out_suppressed(start)
        if suppressed and not start.recipients:
            self._refuse_suppressed(start, suppressed)
            return
        transport = self.transport
        if transport is None:
            self._retry(ctx, start, _RECORDED, _NO_SERVER)
        if not self.gate.may_try():  # a configuration error in force: wait, at no cost
            self._wait(ctx, start)
        attempt = start.email["attempts"]
        try:
            outcome = self._submit(transport, start, attempt)
        except SessionFailure as exc:
            problem = session_problem(exc)
            if problem is not None:
                self._pause(ctx, start, problem)
            self._retry(ctx, start, _RECORDED, str(exc), reply=exc.reply)
        except StoreError as exc:  # the one write inside the submission: TransmissionBegun
            reason = f"TransmissionBegun could not be saved, so the body was not sent: {exc}"
            self._retry(ctx, start, _RECORDED, reason)
        problem = outcome.configuration or outcome_problem(outcome)
        if problem is not None:
            self._pause(ctx, start, problem, outcome=outcome)
            outcome = _retried(outcome)  # past the snooze limit: counted, never refused
        elif self._label() == "SMTP" or outcome.kind != "retry":
            self._resume()  # a provider's 429, 5xx or unreachable host proves no key good
        if suppressed:  # their refusal is written with the attempt's outcome
            outcome = replace(outcome, recipients=[*outcome.recipients, *suppressed])
        self._conclude(ctx, start, outcome, claimed=claimed)

    # -- the suppression list ----------------------------------------------------------

    def _leave_out_suppressed(
        self, start: AttemptStart
    ) -> tuple[AttemptStart, list[RecipientReply]]:
        """``start`` without its suppressed recipients, and a local refusal for each of
        them (550, "suppressed: …"): they are never offered, now or later. The list is
        read as the attempt starts: by the claim that counted it, in the claim's
        transaction, when that claim read it (``start.suppressed``), else here."""
        if self._suppressions is None or not start.recipients:
            return start, []
        found = start.suppressed
        if found is None:
            found = self._suppressions.among([r["address"] for r in start.recipients])
        if not found:
            return start, []
        now = self._clock.now()
        refused = [
            RecipientReply(
                position=r["position"],
                code=550,
                enhanced_status=None,
                text=found[address_key(r["address"])].describe(),
                at=now,
            )
            for r in start.recipients
            if address_key(r["address"]) in found
        ]
        kept = [r for r in start.recipients if address_key(r["address"]) not in found]
        return replace(start, recipients=kept), refused

    def _refuse_suppressed(self, start: AttemptStart, refused: list[RecipientReply]) -> None:
        """Every recipient still owed is suppressed: Refused, nothing sent, each says why."""
        email_id = start.email["id"]
        reason = (
            f"suppressed: every recipient is on the suppression list ({len(refused)}); "
            "nothing was sent"
        )
        outcome = Outcome("refused", reason, Phase.RCPT, recipients=refused)
        self._end(start.email, _RECORDED, _REFUSED, reason=reason, outcome=outcome)
        logger.info(
            "outgoing email %s: every recipient is suppressed: Refused, nothing sent",
            email_id,
            extra=log_fields("email_suppressed", email_id=email_id, recipients=len(refused)),
        )

    # -- configuration errors ----------------------------------------------------------

    def _pause(
        self,
        ctx: JobContext,
        start: AttemptStart,
        problem: str,
        *,
        outcome: Outcome | None = None,
    ) -> None:
        """A configuration error was just seen: say so once, then wait like :meth:`_wait`;
        past the snooze limit, return (the caller counts the attempt as a failure). The
        idle sessions are closed: the next try connects afresh, as a fix would need.

        An ``outcome`` answered after TransmissionBegun (a provider's 401 to the request)
        delivered nothing: the record goes back to Recorded first, with that answer."""
        if self.transport is not None:
            self.transport.close()
        label = self._label()
        if self.gate.failed(problem):
            logger.error(
                "%s configuration error: %s. Delivery is paused: messages stay Recorded and "
                "keep their attempts; the %s is tried again every %g s and delivery "
                "resumes on its own once it accepts",
                label,
                problem,
                "server" if label == "SMTP" else "provider",
                self.gate.retry,
                extra=log_fields("smtp_configuration_error", problem=problem),
            )
        if ctx.job.snoozes >= self._snooze_limit:
            return
        if outcome is not None and outcome.phase is Phase.REPLY:
            reason = f"{label} configuration error: {problem}"
            self._end(start.email, _BEGUN, _RECORDED, reason=reason, outcome=outcome)
        self._wait(ctx, start)

    def _label(self) -> str:
        """How logs and reasons name the transport: "SMTP", or the provider's name."""
        name = "smtp" if self.transport is None else self.transport.name
        return "SMTP" if name == "smtp" else name

    def _wait(self, ctx: JobContext, start: AttemptStart) -> NoReturn:
        """Take the message's attempt back (it stays Recorded) and snooze the job: no
        attempt is spent on a configuration error. Past the snooze limit the attempt
        counts as a failure, so that a message never waits without end."""
        fault = self.gate.fault
        problem = "unknown" if fault is None else fault.problem
        if ctx.job.snoozes >= self._snooze_limit:
            self._retry(ctx, start, _RECORDED, f"{self._label()} configuration error: {problem}")
        self._store.take_back_attempt(
            start.email["id"],
            start.email["attempts"],
            reason=f"waiting, no attempt spent: {self._label()} configuration error: {problem}",
        )
        raise Snooze(min(self.gate.wait(), _LONGEST_SNOOZE))

    def _resume(self) -> None:
        """The server took an envelope: end a configuration error in force, saying so."""
        ended = self.gate.passed()
        if ended is not None:
            logger.info(
                "%s configuration error resolved: delivery resumes (was: %s)",
                self._label(),
                ended.problem,
                extra=log_fields("smtp_configuration_resolved", problem=ended.problem),
            )

    def _submit(self, transport: Transport, start: AttemptStart, attempt: int) -> Outcome:
        email = start.email
        email_id = email["id"]
        return transport.submit(
            Submission(
                email_id=email_id,
                attempt=attempt,
                message_id=email["message_id"],
                sender=email["sender"],
                recipients=[(r["position"], r["address"]) for r in start.recipients],
                data=start.message,
                smtputf8=email["smtputf8"],
                eightbit=email["eightbit"],
                begin=lambda: self._store.mark_transmission_begun(
                    email_id, attempt, now=self._clock.now()
                ),
                clock=self._clock,
                on_phase=self.on_phase,
                answered_at=max(
                    (r["replied_at"] for r in start.recipients if r["replied_at"] is not None),
                    default=None,
                ),
            )
        )

    # -- writing the answer ------------------------------------------------------------

    def _conclude(
        self, ctx: JobContext, start: AttemptStart, outcome: Outcome, *, claimed: bool
    ) -> None:
        email = start.email
        after_body = outcome.phase is Phase.REPLY or outcome.kind in ("sent", "unknown")
        from_stage = _BEGUN if after_body else _RECORDED
        if outcome.kind == "withdrawn":  # cancelled, or past its expiry, before the body
            expired = self._store.expire_email(email["id"], now=self._clock.now())
            logger.info(
                "outgoing email %s %s before its body: not sent",
                email["id"],
                "expired: Refused" if expired else "was cancelled",
                extra=log_fields(
                    "email_expired" if expired else "email_withdrawn", email_id=email["id"]
                ),
            )
            return
        if outcome.kind == "sent":  # under a worker: written with the job's outcome
            job = (ctx.job.id, ctx.job.attempts) if claimed else None
            self._end(email, from_stage, _SENT, reason=None, outcome=outcome, job=job)
            return
        if outcome.kind == "unknown":
            self._end(email, _BEGUN, _BEGUN, reason=outcome.reason, outcome=outcome)
            current = self._records.get_email(email["id"])
            raise PermanentFailure(unknown_outcome_reason(current or email))
        if outcome.kind == "refused":
            reason = f"refused by the server: {outcome.reason}"
            self._end(email, from_stage, _REFUSED, reason=reason, outcome=outcome)
            raise PermanentFailure(reason)
        self._retry(ctx, start, from_stage, outcome.reason, outcome=outcome)

    def _retry(
        self,
        ctx: JobContext,
        start: AttemptStart,
        from_stage: str,
        reason: str,
        *,
        outcome: Outcome | None = None,
        reply: Reply | None = None,
    ) -> NoReturn:
        """Back to Recorded and retry later — or Refused, if this was the last attempt."""
        job = ctx.job
        used = job.attempts - job.attempt_base
        if used >= job.max_attempts:
            final = f"attempts exhausted ({used} of {job.max_attempts}): {reason}"
            self._end(start.email, from_stage, _REFUSED, reason=final, outcome=outcome, reply=reply)
            raise PermanentFailure(final)
        self._end(start.email, from_stage, _RECORDED, reason=reason, outcome=outcome, reply=reply)
        wait = self._until_expiry(start.email, from_stage, used)
        if outcome is not None and outcome.retry_after is not None:
            wait = self._asked_wait(start.email, from_stage, outcome.retry_after)
        raise TransientFailure(reason, retry_after=wait)

    def _asked_wait(self, email: EmailRow, from_stage: str, seconds: float) -> timedelta:
        """The wait the server or provider asked for (``Retry-After``), never past the
        record's expiry when its body never went out."""
        asked = timedelta(seconds=max(seconds, 0.0))
        expiry = email["expires_at"]
        if expiry is None or from_stage != _RECORDED or email["body_transmissions"] > 0:
            return asked
        return max(min(asked, expiry - self._clock.now()), timedelta(0))

    def _until_expiry(self, email: EmailRow, from_stage: str, used: int) -> timedelta | None:
        """The retry's wait when the record expires before the backoff could end: the time
        left until its expiry, so that its delivery job settles it then (Refused,
        "expired") instead of leaving it Recorded past its expiry. None: the usual
        backoff. A record whose body may have gone out never expires."""
        expiry = email["expires_at"]
        if expiry is None or from_stage != _RECORDED or email["body_transmissions"] > 0:
            return None
        left = expiry - self._clock.now()
        if left >= self._backoff.ceiling(used):
            return None
        return max(left, timedelta(0))

    def _end(
        self,
        email: EmailRow,
        from_stage: str,
        to_stage: str,
        *,
        reason: str | None,
        outcome: Outcome | None,
        reply: Reply | None = None,
        job: tuple[int, int] | None = None,
    ) -> None:
        """Write how the attempt ended, conditionally (:meth:`_told` says what came of it).

        With ``job`` (the id and attempt of a delivery job whose worker records its
        outcome: its claim counted this attempt) and no split, the write is kept for the
        transaction in which that worker records the job's outcome, where the store can:
        the answer commits with the job's completion, never after it (one commit for a
        batch of them), and the delivering thread goes on to the next message at once."""
        now = self._clock.now()
        if outcome is not None and outcome.reply is not None:
            reply = outcome.reply
        split = outcome.deferred if outcome is not None and to_stage == _SENT else []
        end = AttemptEnd(
            email_id=email["id"],
            attempt=email["attempts"],
            from_stage=from_stage,
            to_stage=to_stage,
            now=now,
            reason=reason,
            reply_code=reply.code if reply else None,
            reply_text=reply.text if reply else None,
            recipients=outcome.recipients if outcome is not None else (),
            split=split,
            split_due=now + self._backoff.delay(1) if split else None,
            split_job=self._job if split else None,
        )

        def told(written: EmailRow | None) -> None:
            self._told(email, from_stage, to_stage, reason=reason, reply=reply, written=written)

        if job is not None and not split and self._store.end_with_outcome(job, end, told):
            return
        told(self._store.end_attempt(end))

    def _told(
        self,
        email: EmailRow,
        from_stage: str,
        to_stage: str,
        *,
        reason: str | None,
        reply: Reply | None,
        written: EmailRow | None,
    ) -> None:
        """Log what came of an attempt's end: written, or the record had moved on."""
        if written is None:
            logger.warning(
                "outgoing email %s moved on during attempt %s (cancelled or resolved): its "
                "outcome %s was not written",
                email["id"],
                email["attempts"],
                to_stage,
                extra=log_fields(
                    "email_outcome_unwritten",
                    email_id=email["id"],
                    attempt=email["attempts"],
                    to_stage=to_stage,
                ),
            )
            return
        logger.info(
            "outgoing email %s attempt %s: %s -> %s%s",
            email["id"],
            email["attempts"],
            from_stage,
            to_stage,
            f" ({reply.code})" if reply is not None and reply.code is not None else "",
            extra=log_fields(
                "email_stage",
                email_id=email["id"],
                attempt=email["attempts"],
                from_stage=from_stage,
                to_stage=to_stage,
                reply_code=reply.code if reply is not None else None,
                reason=reason,
            ),
        )


def _retried(outcome: Outcome) -> Outcome:
    """``outcome`` as a transient failure: a configuration error never refuses a message."""
    return Outcome(
        "retry", outcome.reason, outcome.phase, outcome.reply, outcome.recipients, outcome.deferred
    )

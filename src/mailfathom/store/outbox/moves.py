"""The outbox's operator moves: cancel, resolve, record again — written once for every dialect.

Internal. Works beside :class:`~mailfathom.store.outbox.records.OutboxRecords` (whose
row conversion and record copies it shares) and runs the named queries of
``store/sql/<dialect>/outbox.sql``. Every move is conditional on the stage it starts
from and audited in the same transaction. A cancel of a message's root record withdraws
every record of the message that is still Recorded (one transaction), and reports each
of the others.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from mailfathom.store.database import Cursor
from mailfathom.store.outbox.records import OutboxRecords
from mailfathom.store.outbox.rows import (
    CancelOutcome,
    DeliveryJobSpec,
    EmailRow,
    OperatorResolve,
)

__all__ = ["OutboxMoves"]


class OutboxMoves:
    """Operator moves on outgoing emails: cancel, resolve, record again (audited)."""

    def __init__(self, records: OutboxRecords) -> None:
        self.db = records.db
        self._q = records.db.queries
        # What the records repository converts and writes for every outbox concern.
        self._email = records.email_row
        self._cutoff = records.cutoff
        self._copy = records.copy_record
        self._recipients_of = records.recipients_of
        self._message_records = records.message_records_in
        self._attach_job = records.attach_job

    def record_again(
        self,
        email_id: int,
        job: DeliveryJobSpec,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[EmailRow | None, EmailRow | None]:
        """A Refused record's bytes and recipients, recorded anew and linked; audited."""
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            cur.execute(self._q["get_email"], {"id": email_id})
            before = cur.fetchone()
            if before is None or before["stage"] != "Refused" or before["compacted_at"]:
                return None, None if before is None else self._email(before)
            positions = [r["position"] for r in self._recipients_of(cur, email_id)]
            created = self._copy(
                cur, email_id, positions, job, due=stamp, now=stamp, keep_expiry=False
            )
            self._audit(
                cur,
                (before, before),
                stamp=stamp,
                actor=actor,
                action="record_again",
                reason=f"recorded again as {created['id']}" + (f": {reason}" if reason else ""),
            )
            return created, None

    # -- operator moves ----------------------------------------------------------------

    def cancel(
        self, email_id: int, *, actor: str, reason: str | None, now: datetime
    ) -> CancelOutcome | None:
        """Recorded → Cancelled for the record and, when it is a message's root, every other
        record of the message: each move conditional (no live delivery lease, no body ever
        out) and audited, all in one transaction."""
        stamp = self.db.time_param(now)
        cutoff = self._cutoff(now)
        with self.db.transaction() as cur:
            cur.execute(self._q["get_email"], {"id": email_id})
            asked = cur.fetchone()
            if asked is None:
                return None
            records = (
                self._message_records(cur, [email_id])
                if asked["root_id"] is None
                else [self._email(asked)]
            )
            text = f"cancelled by {actor}" + (f": {reason}" if reason else "")
            cancelled: list[EmailRow] = []
            refused: list[tuple[EmailRow, bool]] = []
            for before in records:
                params = {"id": before["id"], "now": stamp, "reason": text, "lease_cutoff": cutoff}
                cur.execute(self._q["cancel_email"], params)
                after = cur.fetchone()
                if after is None:
                    refused.append((before, self._delivering(cur, before["id"], cutoff)))
                    continue
                self._audit(
                    cur, (before, after), stamp=stamp, actor=actor, action="cancel", reason=reason
                )
                cancelled.append(self._email(after))
            now_asked = next((r for r in cancelled if r["id"] == email_id), self._email(asked))
            return CancelOutcome(record=now_asked, cancelled=cancelled, refused=refused)

    def resolve(
        self,
        email_id: int,
        decision: OperatorResolve,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[EmailRow | None, EmailRow | None, bool]:
        """TransmissionBegun → the operator's stage, with the delivery job settled to match."""
        stamp = self.db.time_param(now)
        cutoff = self._cutoff(now)
        with self.db.transaction() as cur:
            cur.execute(self._q["get_email"], {"id": email_id})
            before = cur.fetchone()
            if before is None:
                return None, None, False
            text = f"{decision.action} by {actor}" + (f": {reason}" if reason else "")
            cur.execute(
                self._q["resolve_email"],
                {
                    "id": email_id,
                    "now": stamp,
                    "to_stage": decision.to_stage,
                    "reason": text,
                    "lease_cutoff": cutoff,
                },
            )
            after = cur.fetchone()
            if after is None:
                return None, self._email(before), self._delivering(cur, email_id, cutoff)
            moves = (before, after)
            self._audit(cur, moves, stamp=stamp, actor=actor, action=decision.action, reason=reason)
            moved = self._settle_job(
                cur, self._email(after), decision, actor=actor, reason=text, stamp=stamp
            )
            return moved, None, False

    def _settle_job(
        self,
        cur: Cursor,
        email: EmailRow,
        decision: OperatorResolve,
        *,
        actor: str,
        reason: str,
        stamp: Any,
    ) -> EmailRow:
        """Requeue, drop or replace the delivery job so that it matches the decision.

        send_again: a dead-lettered job is requeued; any other job that is not Pending
        (finished, missing, or Claimed by a worker whose lease expired and which may
        still renew it and record a success) is replaced by a fresh job — a stale
        worker cannot send, since only the latest attempt can begin a transmission.
        delivered / give_up: a dead-lettered job is dropped (it will never run).
        A Pending job is left alone: it will find the record's new stage when it runs.
        """
        state = None
        if email["job_id"] is not None:
            cur.execute(self._q["get_job"], {"id": email["job_id"]})
            job = cur.fetchone()
            state = None if job is None else job["state"]
        if decision.deliver_again and state not in ("Pending", "DeadLettered"):
            # the fresh job keeps what the message was recorded with: priority and queue
            job = decision.job
            if email["queue"] is not None:
                job = replace(job, queue=email["queue"])
            return self._attach_job(cur, email["id"], job, stamp, stamp, priority=email["priority"])
        if state == "DeadLettered":
            query, action, to_state = (
                ("requeue_job", "requeue", "Pending")
                if decision.deliver_again
                else ("drop_job", "drop", "Dropped")
            )
            cur.execute(self._q[query], {"id": email["job_id"], "now": stamp})
            if cur.fetchone() is None:  # moved meanwhile (PostgreSQL reads committed)
                return email
            cur.execute(
                self._q["insert_event"],
                {
                    "job_id": email["job_id"],
                    "at": stamp,
                    "actor": actor,
                    "action": action,
                    "from_state": "DeadLettered",
                    "to_state": to_state,
                    "reason": f"outbox: {reason}",
                },
            )
        return email

    def _delivering(self, cur: Cursor, email_id: int, cutoff: Any) -> bool:
        cur.execute(self._q["delivery_in_progress"], {"id": email_id, "lease_cutoff": cutoff})
        return cur.fetchone() is not None

    def _audit(
        self,
        cur: Cursor,
        moved: tuple[Any, Any],
        *,
        stamp: Any,
        actor: str,
        action: str,
        reason: str | None,
    ) -> None:
        before, after = moved
        cur.execute(
            self._q["insert_outbox_event"],
            {
                "email_id": after["id"],
                "at": stamp,
                "actor": actor,
                "action": action,
                "from_stage": before["stage"],
                "to_stage": after["stage"],
                "reason": reason,
            },
        )

"""The outbox's storage logic, written once for every SQL dialect.

Internal. ``OutboxRecords`` runs the named queries of ``store/sql/<dialect>/outbox.sql``
on the same :class:`~mailfathom.store.database.Database` as the job queue's
repositories, so that a record and its delivery job are written by one cursor in one
transaction (the caller's, when ``connection=`` is given). Here: recording, reads, and
the row conversion and record copies the operator moves
(:class:`~mailfathom.store.outbox.moves.OutboxMoves`) and a delivery's attempts
(:class:`~mailfathom.store.outbox.attempts.OutboxAttempts`) share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from mailfathom.clock import DEFAULT_CLOCK_SKEW
from mailfathom.store.database import Cursor, Database
from mailfathom.store.flow.repository import FlowClaims
from mailfathom.store.outbox.rows import (
    DeliveryJobSpec,
    DomainPart,
    EmailRow,
    NewEmail,
    OutboxEventRow,
    RecipientRow,
    RecordedRows,
)

__all__ = ["OutboxRecords"]

_EMAIL_TIMES = (
    "last_attempt_at",
    "created_at",
    "transmission_begun_at",
    "compacted_at",
    "finished_at",
    "expires_at",
)


class OutboxRecords:
    """Outgoing emails: recorded (with their delivery jobs), read and listed."""

    def __init__(self, database: Database, *, clock_skew: timedelta = DEFAULT_CLOCK_SKEW) -> None:
        self.db = database
        #: A delivery's lease is live until ``clock_skew`` after its end (see mailfathom.clock).
        self.clock_skew = clock_skew
        self._q = database.queries
        self._caps = database.capabilities

    # -- conversion --------------------------------------------------------------------

    def cutoff(self, now: datetime) -> Any:
        """Leases that ended after this instant may still be live somewhere."""
        return self.db.time_param(now - self.clock_skew)

    def email_row(self, row: Any) -> EmailRow:
        """A fetched ``mf_emails`` row as an :class:`EmailRow` (aware instants, flags)."""
        email: dict[str, Any] = dict(row)
        for key in _EMAIL_TIMES:
            email[key] = self.db.time_value(email[key])
        email["smtputf8"] = bool(email["smtputf8"])
        email["eightbit"] = bool(email["eightbit"])
        return email  # type: ignore[return-value]

    def recipient_row(self, row: Any) -> RecipientRow:
        """A fetched recipient row as a :class:`RecipientRow` (its reply instant aware)."""
        recipient: dict[str, Any] = dict(row)
        recipient["replied_at"] = self.db.time_value(recipient["replied_at"])
        return recipient  # type: ignore[return-value]

    # -- recording ---------------------------------------------------------------------

    def insert_email(
        self,
        email: NewEmail,
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        parts: Sequence[DomainPart] = (),
    ) -> RecordedRows:
        """The record, its recipients and its delivery job: one transaction, one cursor.

        A dialect that defines ``record_email`` writes all three in that one statement,
        which commits on its own when there is no caller's transaction to join.
        ``parts``: the recipients at other domains, each recorded (same transaction, only
        if the first record is new) as a linked record with its own delivery job.
        """
        params = self._record_params(email, job, now)
        if self._caps.record_email_in_one_statement and not parts:
            return self._insert_single(params, job, connection)
        with self.db.transaction(connection) as cur:
            return self._insert_one(cur, params, job, parts)

    def _insert_single(
        self, params: dict[str, Any], job: DeliveryJobSpec, connection: object | None
    ) -> RecordedRows:
        """One record in the dialect's one ``record_email`` statement, in one round trip:
        on its own where it commits by itself (a pooled connection, or the caller's in
        autocommit mode outside a transaction), else in the caller's transaction with
        the savepoint and its release sent with it."""
        with self.db.single_write(connection) as cur:
            each = getattr(cur, "execute_each", None)
            if each is None:
                return self._insert_one(cur, params, job)
            (found,) = each(self._q["record_email"], [params], last=True)
            return self._recorded(cur, found[0] if found else None, params)

    def insert_emails(
        self,
        emails: Sequence[NewEmail],
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        parts: Sequence[Sequence[DomainPart]] | None = None,
    ) -> list[RecordedRows]:
        """Every record of the batch, with its recipients and delivery job, in one
        transaction (the caller's, when given): all of them are written, or none.
        ``parts``: for each email, its recipients at other domains (see insert_email)."""
        split = [()] * len(emails) if parts is None else parts
        one_statement = self._caps.record_email_in_one_statement and not any(split)
        if one_statement and len(emails) == 1:
            return [self._insert_single(self._record_params(emails[0], job, now), job, connection)]
        if one_statement and _keyless(emails):
            # record_emails: one statement for the batch, which commits on its own where
            # there is no caller's transaction to join (as one record_email does)
            with self.db.single_write(connection) as cur:
                return self._insert_emails_in(cur, emails, job, now, split, last=True)
        with self.db.transaction(connection, pipelined=one_statement) as cur:
            return self._insert_emails_in(cur, emails, job, now, split, last=True)

    def insert_email_chunks(
        self,
        chunks: Iterable[tuple[Sequence[NewEmail], Sequence[Sequence[DomainPart]]]],
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        done: Callable[[list[RecordedRows]], None],
    ) -> None:
        """Write a batch too large to hold at once, chunk after chunk (each: its emails
        and their further parts), all in ONE transaction: whatever ``chunks`` raises (a
        bad message in the last chunk) rolls back every chunk written before. ``done``
        receives each chunk's results in turn, so that no chunk is kept after its turn."""
        with self.db.transaction(connection) as cur:
            for emails, parts in chunks:
                if emails:
                    done(self._insert_emails_in(cur, emails, job, now, parts))

    def _insert_emails_in(
        self,
        cur: Cursor,
        emails: Sequence[NewEmail],
        job: DeliveryJobSpec,
        now: datetime,
        parts: Sequence[Sequence[DomainPart]],
        *,
        last: bool = False,
    ) -> list[RecordedRows]:
        """The records of one batch (or chunk) on ``cur``, in an open transaction;
        ``last``: nothing more is written in it (its end may go with these statements)."""
        each = getattr(cur, "execute_each", None)
        one_statement = self._caps.record_email_in_one_statement and not any(parts)
        if each is not None and one_statement and len(emails) > 1:
            # the whole batch in one statement (and, when it is the last of the write,
            # the end of the write goes with it)
            keyless = _keyless(emails)
            batch = self._batch_params(emails, job, now, keyed=not keyless)
            if keyless:
                (recorded,) = each(self._q["record_emails"], [batch], last=last)
                return self._batch_recorded(recorded, len(emails))
            (recorded,) = each(self._q["record_emails_keyed"], [batch], last=last)
            return self._keyed_recorded(cur, recorded, emails)
        params = [self._record_params(email, job, now) for email in emails]
        if each is not None and one_statement:
            # one record_email per message, pipelined: no round trip each (and, when it is
            # the last of the write, the end of the write goes with them)
            rows: list[list[Any]] = each(self._q["record_email"], params, last=last)
            return [
                self._recorded(cur, found[0] if found else None, one)
                for one, found in zip(params, rows, strict=True)
            ]
        return [
            self._insert_one(cur, one, job, its_parts)
            for one, its_parts in zip(params, parts, strict=True)
        ]

    def _batch_params(
        self, emails: Sequence[NewEmail], job: DeliveryJobSpec, now: datetime, *, keyed: bool
    ) -> dict[str, Any]:
        """The ``record_emails`` (``keyed``: ``record_emails_keyed``) parameters: what the
        batch shares once, the frozen bytes one array, the rest of each email one JSON
        array of objects (in input order)."""
        stamp = self.db.time_param(now)
        due_now = None if stamp is None else stamp.isoformat()
        described = []
        for email in emails:
            expires_at = self.db.time_param(email.expires_at)
            available_at = None if email.run_at is None else self.db.time_param(email.run_at)
            described.append(
                {
                    "message_id": email.message_id,
                    "sender": email.sender,
                    "subject": email.subject,
                    "size": len(email.message),
                    "smtputf8": email.smtputf8,
                    "eightbit": email.eightbit,
                    "addresses": list(email.recipients),
                    "expires_at": None if expires_at is None else expires_at.isoformat(),
                    "available_at": due_now if available_at is None else available_at.isoformat(),
                    "priority": email.priority,
                    "limit_key": (
                        job.limit_key
                        if job.limit_key is not None or job.key_of is None
                        else job.key_of(email.recipients)
                    ),
                }
            )
            if keyed:
                described[-1]["idempotency_key"] = email.idempotency_key
        return {
            "messages": [email.message for email in emails],
            "emails": json.dumps(described),
            "now": stamp,
            "kind": job.kind,
            "queue": job.queue,
            "max_attempts": job.max_attempts,
            "trace_context": job.trace_context,
        }

    def _batch_recorded(self, rows: Sequence[Any], count: int) -> list[RecordedRows]:
        """What ``record_emails`` returned: every record of the batch, in input order."""
        if len(rows) != count or any(row["jobs"] != count for row in rows):  # pragma: no cover
            # the statement inserts every record with its job: never short
            raise RuntimeError(f"recorded {len(rows)} of {count} emails with their jobs")
        recorded = []
        for row in rows:
            created = dict(row)
            recipients = created.pop("recipients")
            del created["jobs"]
            recorded.append(
                RecordedRows(
                    self.email_row(created), [self.recipient_row(r) for r in recipients], True, []
                )
            )
        return recorded

    def _keyed_recorded(
        self, cur: Cursor, rows: Sequence[Any], emails: Sequence[NewEmail]
    ) -> list[RecordedRows]:
        """What ``record_emails_keyed`` returned (a row per email inserted, with its input
        position): those records, and for each email whose key existed, that record."""
        inserted = {row["position"]: row for row in rows}
        if any(row["jobs"] != len(rows) for row in rows):  # pragma: no cover
            raise RuntimeError(f"recorded {len(rows)} emails with other than one job each")
        recorded = []
        for position, email in enumerate(emails, start=1):
            row = inserted.get(position)
            if row is None:
                recorded.append(self._existing(cur, email.idempotency_key))
                continue
            created = dict(row)
            recipients = created.pop("recipients")
            del created["jobs"], created["position"]
            recorded.append(
                RecordedRows(
                    self.email_row(created), [self.recipient_row(r) for r in recipients], True, []
                )
            )
        return recorded

    def _record_params(
        self, email: NewEmail, job: DeliveryJobSpec, now: datetime
    ) -> dict[str, Any]:
        stamp = self.db.time_param(now)
        return {
            "idempotency_key": email.idempotency_key,
            "message_id": email.message_id,
            "sender": email.sender,
            "subject": email.subject,
            "message": email.message,
            "size": len(email.message),
            "smtputf8": email.smtputf8,
            "eightbit": email.eightbit,
            "now": stamp,
            "addresses": json.dumps(list(email.recipients)),
            "expires_at": self.db.time_param(email.expires_at),
            "available_at": stamp if email.run_at is None else self.db.time_param(email.run_at),
            "priority": email.priority,
            "kind": job.kind,
            "queue": job.queue,
            "max_attempts": job.max_attempts,
            "trace_context": job.trace_context,
            # the delivery's limit key: the job's own, or the one its recipients give
            "limit_key": (
                job.limit_key
                if job.limit_key is not None or job.key_of is None
                else job.key_of(email.recipients)
            ),
        }

    def _insert_one(
        self,
        cur: Cursor,
        params: dict[str, Any],
        job: DeliveryJobSpec,
        parts: Sequence[DomainPart] = (),
    ) -> RecordedRows:
        """One record on ``cur``: in the one ``record_email`` statement where the dialect
        has it, else the record, its recipients and its job one statement each (and then
        each of ``parts`` as a linked record with its own delivery job)."""
        if self._caps.record_email_in_one_statement and not parts:
            cur.execute(self._q["record_email"], params)
            return self._recorded(cur, cur.fetchone(), params)
        cur.execute(self._q["insert_email"], params)
        row = cur.fetchone()
        if row is None:
            return self._existing(cur, params["idempotency_key"])
        email_id = row["id"]
        cur.execute(
            self._q["insert_recipients"],
            {"email_id": email_id, "addresses": params["addresses"]},
        )
        created_row = self.attach_job(
            cur,
            email_id,
            replace(job, limit_key=params["limit_key"]),
            params["available_at"],
            params["now"],
            priority=params["priority"],
        )
        for addresses, part_job in parts:
            cur.execute(
                self._q["record_domain_part"], {"parent_id": email_id, "now": params["now"]}
            )
            part_id = cur.fetchone()["id"]
            cur.execute(
                self._q["insert_recipients"],
                {"email_id": part_id, "addresses": json.dumps(list(addresses))},
            )
            self.attach_job(
                cur,
                part_id,
                part_job,
                params["available_at"],
                params["now"],
                priority=params["priority"],
            )
        recipients = self.recipients_of(cur, email_id)
        return RecordedRows(created_row, recipients, True, self._parts_of(cur, email_id, parts))

    def _recorded(self, cur: Cursor, row: Any, params: dict[str, Any]) -> RecordedRows:
        """What ``record_email`` returned: the new record, or (no row) the existing one."""
        if row is None:
            return self._existing(cur, params["idempotency_key"])
        created = dict(row)
        recipients = created.pop("recipients")
        if created.pop("jobs") != 1:  # pragma: no cover - the statement inserts one job
            raise RuntimeError("recorded an email without its delivery job")
        return RecordedRows(
            self.email_row(created), [self.recipient_row(r) for r in recipients], True, []
        )

    def _existing(self, cur: Cursor, key: str | None) -> RecordedRows:
        """The record that holds idempotency ``key`` (whose insert just did nothing)."""
        cur.execute(self._q["email_by_key"], {"idempotency_key": key})
        existing = cur.fetchone()
        if existing is None:  # pragma: no cover - the conflicting row vanished
            raise RuntimeError("idempotency conflict without an existing record")
        email_id = existing["id"]
        recipients = self.recipients_of(cur, email_id)
        return RecordedRows(
            self.email_row(existing), recipients, False, self._parts_of(cur, email_id)
        )

    def _parts_of(
        self, cur: Cursor, root_id: int, written: Sequence[DomainPart] | None = None
    ) -> list[tuple[EmailRow, list[RecipientRow]]]:
        """Every record of the message rooted at ``root_id``, with its recipients, read
        on ``cur`` (in the recording's transaction); none for a message of one record
        (``written`` says none were: nothing to read)."""
        if written is not None and not written:
            return []
        records = self.message_records_in(cur, [root_id])
        if len(records) < 2:
            return []
        cur.execute(
            self._q["email_recipients"], {"ids": self.db.list_param([r["id"] for r in records])}
        )
        found: dict[int, list[RecipientRow]] = {r["id"]: [] for r in records}
        for row in cur.fetchall():
            found[row["email_id"]].append(self.recipient_row(row))
        return [(record, found[record["id"]]) for record in records]

    def recipients_of(self, cur: Cursor, email_id: int) -> list[RecipientRow]:
        """The record's recipients in envelope order, read on ``cur``."""
        cur.execute(self._q["email_recipients"], {"ids": self.db.list_param([email_id])})
        return [self.recipient_row(row) for row in cur.fetchall()]

    def attach_job(
        self,
        cur: Cursor,
        email_id: int,
        job: DeliveryJobSpec,
        available_at: Any,
        now: Any,
        *,
        priority: int = 0,
    ) -> EmailRow:
        """Insert the record's delivery job (same transaction) and point the record at it.

        The job's limit key is ``job.limit_key``, or else the one ``job.key_of`` gives for
        the record's recipients (a split or a copy delivers to the domain they are at).
        """
        cur.execute(
            self._q["insert_job"],
            {
                "kind": job.kind,
                "queue": job.queue,
                "payload": json.dumps({"email_id": email_id}),
                "priority": priority,
                "idempotency_key": None,
                "available_at": available_at,
                "max_attempts": job.max_attempts,
                "now": now,
                "trace_context": job.trace_context,
            },
        )
        job_row = cur.fetchone()
        key = job.limit_key
        if key is None and job.key_of is not None:
            key = job.key_of(r["address"] for r in self.recipients_of(cur, email_id))
        if key is not None:
            FlowClaims(self.db).set_keys(cur, [(job_row["id"], key)])
        cur.execute(self._q["set_email_job"], {"id": email_id, "job_id": job_row["id"]})
        return self.email_row(cur.fetchone())

    # -- reads -------------------------------------------------------------------------

    def get_email(self, email_id: int) -> EmailRow | None:
        """The record with ``email_id``, or None."""
        with self.db.reading() as cur:
            cur.execute(self._q["get_email"], {"id": email_id})
            row = cur.fetchone()
        return None if row is None else self.email_row(row)

    def email_message(self, email_id: int) -> bytes | None:
        """The frozen bytes of the record, or None."""
        with self.db.reading() as cur:
            cur.execute(self._q["email_message"], {"id": email_id})
            row = cur.fetchone()
        return None if row is None else bytes(row["message"])

    def recipients(self, email_ids: Sequence[int]) -> dict[int, list[RecipientRow]]:
        """Recipients per record id, in envelope order."""
        found: dict[int, list[RecipientRow]] = {email_id: [] for email_id in email_ids}
        if not email_ids:
            return found
        with self.db.reading() as cur:
            cur.execute(self._q["email_recipients"], {"ids": self.db.list_param(list(email_ids))})
            for row in cur.fetchall():
                found[row["email_id"]].append(self.recipient_row(row))
        return found

    def list_emails(
        self, stage: str | None, *, limit: int, before_id: int | None = None
    ) -> list[EmailRow]:
        """Newest first, keyset-paginated."""
        with self.db.reading() as cur:
            cur.execute(
                self._q["list_emails"], {"stage": stage, "before_id": before_id, "limit": limit}
            )
            return [self.email_row(row) for row in cur.fetchall()]

    def unknown_emails(
        self, *, now: datetime, limit: int, after_id: int | None = None
    ) -> list[EmailRow]:
        """TransmissionBegun records that no live delivery is working on, oldest first."""
        params = {"lease_cutoff": self.cutoff(now), "limit": limit, "after_id": after_id}
        with self.db.reading() as cur:
            cur.execute(self._q["unknown_emails"], params)
            return [self.email_row(row) for row in cur.fetchall()]

    def count_unknown_emails(self, *, now: datetime) -> int:
        """How many unknown outcomes there are, exactly."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_unknown_emails"], {"lease_cutoff": self.cutoff(now)})
            return int(cur.fetchone()["n"])

    def count_emails(self) -> dict[str, int]:
        """Records per stage name."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_emails"], {})
            return {row["stage"]: int(row["n"]) for row in cur.fetchall()}

    def events(self, email_id: int) -> list[OutboxEventRow]:
        """Operator actions on the record, oldest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["outbox_events"], {"id": email_id})
            found = []
            for row in cur.fetchall():
                event: dict[str, Any] = dict(row)
                event["at"] = self.db.time_value(event["at"])
                found.append(event)
        return found  # type: ignore[return-value]

    def recent_events(self, *, limit: int, before_id: int | None = None) -> list[OutboxEventRow]:
        """Operator actions on every record, newest first, older than ``before_id``."""
        with self.db.reading() as cur:
            cur.execute(self._q["recent_outbox_events"], {"limit": limit, "before_id": before_id})
            found = []
            for row in cur.fetchall():
                event: dict[str, Any] = dict(row)
                event["at"] = self.db.time_value(event["at"])
                found.append(event)
        return found  # type: ignore[return-value]

    def message_records(self, root_ids: Sequence[int]) -> list[EmailRow]:
        """Every record of the messages rooted at ``root_ids``, oldest first."""
        if not root_ids:
            return []
        with self.db.reading() as cur:
            return self.message_records_in(cur, root_ids)

    def message_records_in(self, cur: Cursor, root_ids: Sequence[int]) -> list[EmailRow]:
        """:meth:`message_records`, read on ``cur`` (a caller's transaction)."""
        cur.execute(self._q["message_records"], {"ids": self.db.list_param(list(root_ids))})
        return [self.email_row(row) for row in cur.fetchall()]

    def copy_record(
        self,
        cur: Cursor,
        parent_id: int,
        positions: list[int],
        job: DeliveryJobSpec,
        *,
        due: Any,
        now: Any,
        keep_expiry: bool = True,
    ) -> EmailRow:
        """A new Recorded record of the parent's message: its bytes and Message-ID, some of
        its recipients, and what the message was recorded with (priority, queue and —
        unless ``keep_expiry`` is False — expiry), delivered by a job in that queue at
        that priority."""
        cur.execute(
            self._q["split_email"],
            {"parent_id": parent_id, "now": now, "keep_expiry": keep_expiry},
        )
        child_id = cur.fetchone()["id"]
        cur.execute(
            self._q["split_recipients"],
            {
                "child_id": child_id,
                "parent_id": parent_id,
                "positions": self.db.list_param(positions),
            },
        )
        cur.execute(self._q["get_email"], {"id": child_id})
        child = cur.fetchone()
        inherited = job if child["queue"] is None else replace(job, queue=child["queue"])
        return self.attach_job(cur, child_id, inherited, due, now, priority=child["priority"])


def _keyless(emails: Sequence[NewEmail]) -> bool:
    """No email of the batch has an idempotency key: none can conflict with a record."""
    return all(email.idempotency_key is None for email in emails)

"""The outbox's delivery attempts: counted, begun, ended — written once for every dialect.

Internal. Works beside :class:`~mailfathom.store.outbox.records.OutboxRecords` (whose
row conversion and record copies it shares) and runs the named queries of
``store/sql/<dialect>/outbox.sql``, converting values through the
:class:`~mailfathom.store.database.Database`. An attempt is counted by the delivery
handler (``begin_attempt``) or, where the dialect can, by the claim that leased its job:
the claim hook (``start_claimed``, registered with ``add_claim_hook``) counts it in the
claim's transaction and keeps what it sends for the handler (``claimed_start``); the
release hook (``unstart_released``, registered with ``add_release_hook``) takes that
count back for a job given back unstarted. Then the transmission begins
(``mark_transmission_begun``) and the attempt ends (``end_attempt``, with a split for
the recipients a server deferred), or the record expires (``expire_email``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from mailfathom.store.base import JobRow
from mailfathom.store.database import Cursor
from mailfathom.store.group_commit import GroupCommit
from mailfathom.store.outbox.records import OutboxRecords
from mailfathom.store.outbox.rows import (
    AttemptEnd,
    AttemptStart,
    EmailRow,
    RecipientRow,
    SuppressedAddress,
)

__all__ = ["OutboxAttempts"]

T = TypeVar("T")
#: Reads the suppression list's entries among some addresses on a claim's cursor, keyed by
#: the list's address key (:meth:`OutboxAttempts.read_suppressions_at_claim`).
SuppressionLookup = Callable[[Cursor, list[str]], Mapping[str, SuppressedAddress]]
#: Writes, in a transaction recording job outcomes, what waits for those (job id, attempt)
#: pairs; returns what to call once it commits (:meth:`OutboxAttempts.write_ended`).
OutcomeHook = Callable[[Cursor, list[tuple[int, int]]], Callable[[], None] | None]

#: Claimed attempts kept for their handlers at most (a job released unstarted never
#: takes its own; the oldest are forgotten first, and their handlers would count anew).
_CLAIMED_KEPT = 10_000


class OutboxAttempts:
    """Delivery attempts: counted (by the claim or the handler), begun, ended, split."""

    def __init__(self, records: OutboxRecords) -> None:
        database = records.db
        self.db = database
        self._q = database.queries
        self._caps = database.capabilities
        # What the records repository converts, reads and writes for every outbox concern.
        self._email = records.email_row
        self._recipient = records.recipient_row
        self._get_email = records.get_email
        self._copy = records.copy_record
        # On SQLite, where one connection writes at a time anyway, a delivery thread's
        # writes share their commit with the other threads' (one disk flush for all);
        # each call still returns only once its write is durable. PostgreSQL already
        # shares WAL flushes between concurrent commits and runs the connections'
        # statements side by side, so there each write keeps its own transaction
        # (measured: funnelling them through one connection lost a quarter of the rate).
        self._grouped = GroupCommit(database.transaction) if database.dialect == "sqlite" else None
        # Attempts counted by a claim (start_claimed), by (job id, job attempt), until the
        # job's handler takes its own.
        self._claimed: dict[tuple[int, int], AttemptStart] = {}
        self._claimed_lock = threading.Lock()
        # Reads the suppression list on a claim's cursor (read_suppressions_at_claim).
        self._suppressed: SuppressionLookup | None = None
        # Attempts' ends kept to be written with their jobs' outcomes (end_with_outcome), by
        # (job id, job attempt), until the transaction that recorded them commits.
        self._ending: dict[tuple[int, int], _Ending] = {}
        self._ends_with_outcomes = False

    # -- delivery attempts -------------------------------------------------------------

    def begin_attempt(
        self, email_id: int, *, now: datetime
    ) -> tuple[AttemptStart | None, EmailRow | None]:
        """Count an attempt on a Recorded record; return its bytes and owed recipients.

        A dialect whose ``start_attempts`` returns the owed recipients on each row
        (PostgreSQL) does all of it in that one statement for this one record, which
        commits on its own (one round trip instead of five).
        """
        stamp = self.db.time_param(now)
        if self._caps.attempts_start_in_one_statement:
            with self.db.single_write() as cur:
                cur.execute(self._q["start_attempts"], {"ids": [email_id], "now": stamp})
                row = cur.fetchone()
            if row is None:
                return None, self._get_email(email_id)
            return self._started(dict(row)), None

        def write(cur: Cursor) -> tuple[AttemptStart | None, EmailRow | None]:
            cur.execute(self._q["begin_attempt"], {"id": email_id, "now": stamp})
            row = cur.fetchone()
            if row is None:
                cur.execute(self._q["get_email"], {"id": email_id})
                current = cur.fetchone()
                return None, None if current is None else self._email(current)
            email = self._email(row)
            cur.execute(self._q["email_message"], {"id": email_id})
            message = bytes(cur.fetchone()["message"])
            cur.execute(self._q["owed_recipients"], {"id": email_id})
            owed = [self._recipient(r) for r in cur.fetchall()]
            return AttemptStart(email=email, message=message, recipients=owed), None

        return self._write(write)

    # -- attempts counted by the claim -------------------------------------------------

    def counts_at_claim(self) -> bool:
        """Whether this dialect counts delivery attempts in the claim (``start_claimed``)."""
        return self._caps.attempts_counted_at_claim

    def read_suppressions_at_claim(self, lookup: SuppressionLookup) -> None:
        """Have :meth:`start_claimed` read the suppression list with ``lookup`` (on the
        claim's cursor, for every recipient of the batch at once) as it counts the
        attempts: each attempt then starts knowing its suppressed recipients, and its
        handler makes no read of its own (one statement per claim, not per message)."""
        self._suppressed = lookup

    def start_claimed(
        self, cur: Cursor, jobs: Sequence[JobRow], now: datetime
    ) -> Callable[[], None] | None:
        """The claim hook of the delivery kind: count the attempt of every delivery job the
        claim on ``cur`` just leased, in that claim's transaction (``start_attempts``: one
        statement and no commit of its own for the whole batch), and keep what each
        attempt sends for :meth:`claimed_start` — once the claim has committed (the
        returned callable). A record that is not Recorded (or is past its expiry) is not
        touched: its handler finds it with :meth:`begin_attempt`, as before.
        """
        jobs_of: dict[int, tuple[int, int]] = {}
        for job in jobs:
            email_id = job["payload"].get("email_id")
            if type(email_id) is int and email_id not in jobs_of:  # one attempt per record
                jobs_of[email_id] = (job["id"], job["attempts"])
        starts: dict[tuple[int, int], AttemptStart] = {}
        if jobs_of:
            started = self._with_suppressions(cur, self._start_attempts(cur, list(jobs_of), now))
            for start in started:
                starts[jobs_of[start.email["id"]]] = start
        leased = [(job["id"], job["attempts"]) for job in jobs]

        def committed() -> None:
            with self._claimed_lock:
                for key in leased:  # a start left from an earlier lease must not linger
                    if key in starts:
                        self._claimed[key] = starts[key]
                    else:
                        self._claimed.pop(key, None)
                while len(self._claimed) > _CLAIMED_KEPT:  # never run: forget the oldest
                    del self._claimed[next(iter(self._claimed))]

        return committed

    def unstart_released(
        self, cur: Cursor, released: Sequence[tuple[int, int]]
    ) -> Callable[[], None] | None:
        """The release hook of the delivery kind: the jobs given back unstarted (their
        (id, attempt) pairs) whose claim counted their record's attempt get that count
        taken back, in the release's transaction (``unstart_attempts``), and what the claim
        kept for their handlers is dropped once it commits. A job given back spent no
        attempt, and neither did its message: a worker's shutdown never inflates a record's
        count. (``last_attempt_at`` keeps the claim's instant: the time before is not kept.)
        """
        with self._claimed_lock:
            kept = [(key, self._claimed[key]) for key in released if key in self._claimed]
        if not kept:
            return None
        email_ids = [start.email["id"] for _, start in kept]
        ids = email_ids if self.db.dialect == "postgresql" else self.db.list_param(email_ids)
        cur.execute(self._q["unstart_attempts"], {"ids": ids})

        def committed() -> None:
            with self._claimed_lock:
                for key, _ in kept:
                    self._claimed.pop(key, None)

        return committed

    def _start_attempts(
        self, cur: Cursor, email_ids: list[int], now: datetime
    ) -> list[AttemptStart]:
        """``start_attempts`` on ``cur``: the records it started, each with what it sends
        (PostgreSQL returns the owed recipients as arrays on each row, SQLite in a second
        statement, ``owed_recipients_of``)."""
        ids = email_ids if self.db.dialect == "postgresql" else self.db.list_param(email_ids)
        cur.execute(self._q["start_attempts"], {"ids": ids, "now": self.db.time_param(now)})
        rows = [dict(row) for row in cur.fetchall()]
        if self._caps.attempts_start_in_one_statement:
            return [self._started(row) for row in rows]
        owed: dict[int, list[RecipientRow]] = {row["id"]: [] for row in rows}
        if rows:
            cur.execute(self._q["owed_recipients_of"], {"ids": self.db.list_param(list(owed))})
            for found in cur.fetchall():
                owed[found["email_id"]].append(self._recipient(found))
        return [
            AttemptStart(
                message=bytes(row.pop("message")),
                email=self._email(row),
                recipients=owed[row["id"]],
            )
            for row in rows
        ]

    def _with_suppressions(self, cur: Cursor, starts: list[AttemptStart]) -> list[AttemptStart]:
        """``starts``, each with the suppression list's entries among the batch's
        recipients, read on ``cur`` (one statement), when a lookup was given."""
        lookup = self._suppressed
        if lookup is None or not starts:
            return starts
        addresses = list(dict.fromkeys(r["address"] for s in starts for r in s.recipients))
        found = lookup(cur, addresses) if addresses else {}
        return [replace(start, suppressed=found) for start in starts]

    def claimed_start(self, job_id: int, job_attempt: int) -> AttemptStart | None:
        """What attempt ``job_attempt`` of delivery job ``job_id`` sends, if its claim
        counted it (:meth:`start_claimed`); taken once. None: call :meth:`begin_attempt`."""
        with self._claimed_lock:
            return self._claimed.pop((job_id, job_attempt), None)

    def _started(self, row: dict[str, Any]) -> AttemptStart:
        """An :class:`AttemptStart` from a ``start_attempts`` row (recipients as arrays)."""
        message = bytes(row.pop("message"))
        columns = [
            row.pop(name) or []
            for name in (
                "owed_positions",
                "owed_addresses",
                "owed_codes",
                "owed_statuses",
                "owed_texts",
                "owed_replied",
            )
        ]
        email = self._email(row)
        owed: list[RecipientRow] = [
            {
                "email_id": email["id"],
                "position": position,
                "address": address,
                "reply_code": code,
                "enhanced_status": status,
                "reply_text": text,
                "replied_at": self.db.time_value(replied),
            }
            for position, address, code, status, text, replied in zip(*columns, strict=True)
        ]
        return AttemptStart(email=email, message=message, recipients=owed)

    def expire_email(self, email_id: int, *, now: datetime) -> EmailRow | None:
        """Recorded → Refused ("expired") if ``email_id`` is past its ``expires_at`` and no
        body ever went out for it; None (nothing changed) otherwise."""
        params = {"id": email_id, "now": self.db.time_param(now)}

        def write(cur: Cursor) -> EmailRow | None:
            cur.execute(self._q["expire_email"], params)
            row = cur.fetchone()
            return None if row is None else self._email(row)

        return self._write(write)

    def take_back_attempt(self, email_id: int, attempt: int, *, reason: str) -> bool:
        """Uncount attempt ``attempt`` of ``email_id`` if the record is still Recorded at
        it, with ``reason`` as why it waits (``take_back_attempt``): a delivery that
        stopped on a configuration error spent none of the message's attempts. False
        when the record moved on."""
        params = {"id": email_id, "attempt": attempt, "reason": reason}

        def write(cur: Cursor) -> bool:
            cur.execute(self._q["take_back_attempt"], params)
            return cur.fetchone() is not None

        return self._write(write, single=True)

    def mark_transmission_begun(self, email_id: int, attempt: int, *, now: datetime) -> bool:
        """Recorded → TransmissionBegun if nothing moved the record since ``attempt`` began."""
        params = {"id": email_id, "attempt": attempt, "now": self.db.time_param(now)}

        def write(cur: Cursor) -> bool:
            cur.execute(self._q["mark_transmission_begun"], params)
            return cur.fetchone() is not None

        return self._write(write, single=True)

    def write_ends_with_outcomes(self) -> OutcomeHook:
        """Have :meth:`end_with_outcome` keep attempts' ends for the returned hook, which
        the caller runs in every transaction that records job outcomes (the claims'
        ``add_outcome_hook``): an answer and its job's outcome then commit together."""
        self._ends_with_outcomes = True
        return self.write_ended

    def end_with_outcome(
        self, job: tuple[int, int], end: AttemptEnd, written: Callable[[EmailRow | None], None]
    ) -> bool:
        """Keep ``end`` for the transaction that records the outcome of attempt ``job``
        (job id, job attempt): :meth:`write_ended` writes it there, before that outcome, and
        tells ``written`` the result once it commits. False (nothing kept) unless
        :meth:`write_ends_with_outcomes` was called."""
        if not self._ends_with_outcomes:
            return False
        with self._claimed_lock:
            self._ending[job] = _Ending(end, written)
            while len(self._ending) > _CLAIMED_KEPT:  # never run: forget the oldest
                del self._ending[next(iter(self._ending))]
        return True

    def write_ended(
        self, cur: Cursor, pairs: Sequence[tuple[int, int]]
    ) -> Callable[[], None] | None:
        """The outcome hook: write on ``cur`` the kept end of every attempt among ``pairs``
        (job id, job attempt) whose outcome this transaction records, conditionally, as
        :meth:`end_attempt` does; once it commits, forget them and tell their callers.
        Kept until then: a recording that fails and is tried again writes them again."""
        with self._claimed_lock:
            found = [(key, self._ending[key]) for key in pairs if key in self._ending]
        if not found:
            return None
        rows = self._ends_on(cur, [ending.end for _, ending in found])
        done = [(key, ending, row) for (key, ending), row in zip(found, rows, strict=True)]

        def committed() -> None:
            with self._claimed_lock:
                for key, ending, _ in done:
                    if self._ending.get(key) is ending:
                        del self._ending[key]
            for _, ending, row in done:
                ending.written(row)

        return committed

    def _ends_on(self, cur: Cursor, ends: list[AttemptEnd]) -> list[EmailRow | None]:
        """The ends of attempts (and their splits) written on ``cur``, in its transaction:
        on a dialect that writes an end in one statement and pipelines (PostgreSQL), every
        end without a split goes out at once (one round trip for the batch)."""
        each = getattr(cur, "execute_each", None)
        if (
            each is not None
            and self._caps.end_attempt_in_one_statement
            and not any(end.split for end in ends)
        ):
            found = each(self._q["end_attempt_whole"], [self._whole_params(e) for e in ends])
            return [self._email(rows[0]) if rows else None for rows in found]
        if self._caps.end_attempt_in_one_statement:
            return [self._end_attempt_whole(cur, end) for end in ends]
        return [self._end_attempt(cur, end) for end in ends]

    def end_attempt(self, end: AttemptEnd) -> EmailRow | None:
        """Write the end of an attempt (and a split) if the record is still where it was."""
        if self._caps.end_attempt_in_one_statement:
            return self._write(lambda cur: self._end_attempt_whole(cur, end), single=not end.split)
        return self._write(lambda cur: self._end_attempt(cur, end))

    def _write(self, write: Callable[[Cursor], T], *, single: bool = False) -> T:
        """A delivery write in a transaction: shared with others' where that pays.

        ``single``: ``write`` is one statement, which on a database that does not share
        the commit runs on its own (autocommit: one round trip, not BEGIN and COMMIT too).
        """
        if self._grouped is not None:
            return self._grouped.run(write)
        if single:
            with self.db.single_write() as cur:
                return write(cur)
        with self.db.transaction() as cur:
            return write(cur)

    def _end_attempt_whole(self, cur: Cursor, end: AttemptEnd) -> EmailRow | None:
        """``end_attempt_whole``: the record's end and every recipient's reply in one
        statement, then the split (if any) in the same transaction."""
        cur.execute(self._q["end_attempt_whole"], self._whole_params(end))
        row = cur.fetchone()
        if row is None:
            return None
        if end.split:
            self._split(cur, end, self.db.time_param(end.now))
        return self._email(row)

    def _whole_params(self, end: AttemptEnd) -> dict[str, Any]:
        """``end_attempt_whole``'s parameters: the record's end and the replies as arrays."""
        replies = list(end.recipients)
        return {
            **self._end_params(end),
            "positions": [r.position for r in replies],
            "codes": [r.code for r in replies],
            "statuses": [r.enhanced_status for r in replies],
            "texts": [r.text for r in replies],
            "replied": [self.db.time_param(r.at) for r in replies],
        }

    def _end_params(self, end: AttemptEnd) -> dict[str, Any]:
        return {
            "id": end.email_id,
            "attempt": end.attempt,
            "from_stage": end.from_stage,
            "to_stage": end.to_stage,
            "now": self.db.time_param(end.now),
            "reply_code": end.reply_code,
            "reply_text": end.reply_text,
            "reason": end.reason,
        }

    def _end_attempt(self, cur: Cursor, end: AttemptEnd) -> EmailRow | None:
        stamp = self.db.time_param(end.now)
        cur.execute(self._q["end_attempt"], self._end_params(end))
        row = cur.fetchone()
        if row is None:
            return None
        updated = self._email(row)
        for reply in end.recipients:
            cur.execute(
                self._q["set_recipient_reply"],
                {
                    "email_id": end.email_id,
                    "position": reply.position,
                    "reply_code": reply.code,
                    "enhanced_status": reply.enhanced_status,
                    "reply_text": reply.text,
                    "replied_at": self.db.time_param(reply.at),
                },
            )
        if end.split:
            self._split(cur, end, stamp)
        return updated

    def _split(self, cur: Cursor, end: AttemptEnd, stamp: Any) -> None:
        """A new linked Recorded record for the recipients the server deferred."""
        if end.split_job is None:
            raise ValueError("a split needs the delivery job spec of the new record")
        due = self.db.time_param(end.split_due or end.now)
        self._copy(cur, end.email_id, list(end.split), end.split_job, due=due, now=stamp)


@dataclass(frozen=True, slots=True)
class _Ending:
    """An attempt's end waiting for its job's outcome, and whom to tell once written."""

    end: AttemptEnd
    written: Callable[[EmailRow | None], None]

"""The suppressions repository: the suppression list and its audit, for every dialect.

Internal. Runs the named queries of ``store/sql/*/suppressions.sql`` (migration
``suppressions``) and converts values through the
:class:`~mailfathom.store.database.Database`. Addresses arrive already normalised
(lower-cased) by the layer above; every add and lift is audited in its own transaction,
and a soft bounce is an audit event of its own (it suppresses nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

from mailfathom.store.database import Cursor, Database

__all__ = ["SuppressionEventRow", "SuppressionRow", "SuppressionsRepository"]


class SuppressionRow(TypedDict):
    """One suppressed address as stored."""

    address: str
    reason: str
    source: str
    detail: str | None
    created_at: datetime
    actor: str


class SuppressionEventRow(TypedDict):
    """One add or lift of a suppression."""

    id: int
    address: str
    at: datetime
    actor: str
    action: str
    reason: str
    source: str
    detail: str | None


class SuppressionsRepository:
    """Suppressed addresses: added, lifted (both audited), looked up and listed."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self._q = database.queries

    def add(
        self,
        address: str,
        *,
        reason: str,
        source: str,
        detail: str | None,
        actor: str,
        now: datetime,
    ) -> tuple[SuppressionRow, bool]:
        """Suppress ``address`` with its audit row; returns the entry and True, or the
        existing entry and False (nothing written) when it was already suppressed."""
        params = {
            "address": address,
            "reason": reason,
            "source": source,
            "detail": detail,
            "actor": actor,
            "now": self.db.time_param(now),
        }
        while True:  # a lift racing between the two statements: insert again
            with self.db.transaction() as cur:
                cur.execute(self._q["add_suppression"], params)
                row = cur.fetchone()
                if row is None:
                    cur.execute(self._q["get_suppression"], {"address": address})
                    found = cur.fetchone()
                    if found is None:
                        continue
                    return self._row(found), False
                cur.execute(self._q["insert_suppression_event"], {**params, "action": "add"})
                return self._row(row), True

    def ingest_once(
        self,
        receipt: str,
        adds: Sequence[tuple[str, str, str | None]],
        softs: Sequence[tuple[str, str | None]],
        *,
        source: str,
        actor: str,
        now: datetime,
    ) -> list[SuppressionRow] | None:
        """Apply one notification in one transaction, once: mark ``receipt`` applied,
        suppress each ``(address, reason, detail)`` of ``adds`` (audited; an address
        already suppressed keeps its entry) and record each ``(address, detail)`` of
        ``softs`` as a soft bounce. Returns the entries of ``adds``, or None (nothing
        written) when ``receipt`` was applied before."""
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            cur.execute(self._q["insert_suppression_receipt"], {"receipt": receipt, "now": stamp})
            if cur.fetchone() is None:
                return None
            entries = []
            for address, reason, detail in adds:
                params = {
                    "address": address,
                    "reason": reason,
                    "source": source,
                    "detail": detail,
                    "actor": actor,
                    "now": stamp,
                }
                cur.execute(self._q["add_suppression"], params)
                row = cur.fetchone()
                if row is None:
                    cur.execute(self._q["get_suppression"], {"address": address})
                    row = cur.fetchone()
                else:
                    cur.execute(self._q["insert_suppression_event"], {**params, "action": "add"})
                if row is not None:
                    entries.append(self._row(row))
            for address, detail in softs:
                cur.execute(
                    self._q["insert_suppression_event"],
                    {
                        "address": address,
                        "now": stamp,
                        "actor": actor,
                        "action": "soft_bounce",
                        "reason": "soft_bounce",
                        "source": source,
                        "detail": detail,
                    },
                )
            return entries

    def lift(
        self, address: str, *, actor: str, detail: str | None, now: datetime
    ) -> SuppressionRow | None:
        """Remove ``address`` from the list with its audit row; None when it was not on it."""
        with self.db.transaction() as cur:
            cur.execute(self._q["lift_suppression"], {"address": address})
            row = cur.fetchone()
            if row is None:
                return None
            lifted = self._row(row)
            cur.execute(
                self._q["insert_suppression_event"],
                {
                    "address": address,
                    "now": self.db.time_param(now),
                    "actor": actor,
                    "action": "lift",
                    "reason": lifted["reason"],
                    "source": lifted["source"],
                    "detail": detail,
                },
            )
            return lifted

    def soft_bounce(
        self, address: str, *, source: str, detail: str | None, actor: str, now: datetime
    ) -> None:
        """Record a soft bounce of ``address`` as an audit event (action ``soft_bounce``);
        the list itself is not touched."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["insert_suppression_event"],
                {
                    "address": address,
                    "now": self.db.time_param(now),
                    "actor": actor,
                    "action": "soft_bounce",
                    "reason": "soft_bounce",
                    "source": source,
                    "detail": detail,
                },
            )

    def event_counts(self) -> dict[str, int]:
        """How many audit events there are, by action (actions with none are absent)."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_suppression_events"], {})
            return {row["action"]: int(row["n"]) for row in cur.fetchall()}

    def recent_events(
        self, action: str, *, limit: int, before_id: int | None = None
    ) -> list[SuppressionEventRow]:
        """The newest events of ``action``, newest first, older than ``before_id``."""
        with self.db.reading() as cur:
            cur.execute(
                self._q["recent_suppression_events"],
                {"action": action, "limit": limit, "before_id": before_id},
            )
            return self._events(cur.fetchall())

    def get(self, address: str) -> SuppressionRow | None:
        """The entry of ``address``, or None."""
        with self.db.reading() as cur:
            cur.execute(self._q["get_suppression"], {"address": address})
            row = cur.fetchone()
        return None if row is None else self._row(row)

    def among(
        self, addresses: Sequence[str], *, cursor: Cursor | None = None
    ) -> dict[str, SuppressionRow]:
        """The entries of those of ``addresses`` that are suppressed, by address: read on
        ``cursor`` when given (in its transaction, as a claim counting delivery attempts
        reads them), else on a connection of its own."""
        if not addresses:
            return {}
        params = {"addresses": self.db.list_param(list(addresses))}
        if cursor is not None:
            cursor.execute(self._q["suppressed_among"], params)
            rows = [self._row(row) for row in cursor.fetchall()]
        else:
            with self.db.reading() as cur:
                cur.execute(self._q["suppressed_among"], params)
                rows = [self._row(row) for row in cur.fetchall()]
        return {row["address"]: row for row in rows}

    def entries(
        self, *, search: str | None, limit: int, after: str | None = None
    ) -> list[SuppressionRow]:
        """Entries by address, ``limit`` at most, after ``after``, containing ``search``."""
        pattern = None
        if search is not None:
            escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            pattern = f"%{escaped}%"
        with self.db.reading() as cur:
            cur.execute(
                self._q["list_suppressions"], {"after": after, "pattern": pattern, "limit": limit}
            )
            return [self._row(row) for row in cur.fetchall()]

    def counts(self) -> dict[str, int]:
        """How many addresses are suppressed, by reason (reasons with none are absent)."""
        with self.db.reading() as cur:
            cur.execute(self._q["count_suppressions"], {})
            return {row["reason"]: int(row["n"]) for row in cur.fetchall()}

    def events(self, address: str) -> list[SuppressionEventRow]:
        """The audit trail of ``address``, oldest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["suppression_events"], {"address": address})
            return self._events(cur.fetchall())

    def _events(self, fetched: Sequence[Any]) -> list[SuppressionEventRow]:
        rows: list[dict[str, Any]] = [dict(row) for row in fetched]
        for row in rows:
            row["at"] = self.db.time_value(row["at"])
        return rows  # type: ignore[return-value]

    def _row(self, row: Any) -> SuppressionRow:
        found: dict[str, Any] = dict(row)
        found["created_at"] = self.db.time_value(found["created_at"])
        return found  # type: ignore[return-value]

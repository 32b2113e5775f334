"""One message, however many records it became: its parts, its snapshot, its cancel.

Internal. A message is recorded as several records when ``domain_limits`` splits it
per recipient domain; a record gains another when a server defers some recipients
(they are split off to be retried) or when an operator records a Refused record
again. Every such record names the message's first record as ``root_id``. What the
public API returns for the root stands for the whole message: every recipient (each
with the reply of the record that delivers it now) and every part.
"""

from __future__ import annotations

from collections.abc import Sequence

from mailfathom.delivery.model import CancelledEmail, OutgoingEmail, RecordedEmail
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import IllegalTransition
from mailfathom.store.outbox.protocol import OutboxRecordsStore
from mailfathom.store.outbox.rows import (
    CancelOutcome,
    EmailRow,
    RecipientRow,
    RecordedRows,
)

__all__ = ["cancel_result", "message_views", "recorded_views", "refusal"]

_RECORDED = OutgoingEmailStage.RECORDED.value
_FINAL = (OutgoingEmailStage.REFUSED.value, OutgoingEmailStage.CANCELLED.value)


def message_views(store: OutboxRecordsStore, rows: Sequence[EmailRow]) -> list[OutgoingEmail]:
    """The public snapshot of each row: a message's root with every recipient and part,
    any other record (a part, or a message of one record) as itself."""
    return [view for view, _ in _views(store, rows)]


def recorded_views(found: Sequence[RecordedRows]) -> list[RecordedEmail]:
    """What ``record``/``record_many`` return, from what the recording read in its own
    transaction (so it holds in a caller's uncommitted one too): each message with every
    recipient and part, and whether the call created it."""
    results = []
    for one in found:
        if not one.parts:
            results.append(RecordedEmail.from_record(one.email, one.recipients, one.created))
            continue
        parts = tuple(OutgoingEmail.from_row(row, recipients) for row, recipients in one.parts)
        every = _every_recipient([recipients for _, recipients in one.parts])
        results.append(RecordedEmail.from_record(one.email, every, one.created, parts))
    return results


def _views(
    store: OutboxRecordsStore, rows: Sequence[EmailRow]
) -> list[tuple[OutgoingEmail, list[RecipientRow]]]:
    roots = [row["id"] for row in rows if row["root_id"] is None]
    records: dict[int, list[EmailRow]] = {}
    for record in store.message_records(roots):
        records.setdefault(record["root_id"] or record["id"], []).append(record)
    ids = {row["id"] for row in rows} | {r["id"] for found in records.values() for r in found}
    recipients = store.recipients(sorted(ids))
    views: list[tuple[OutgoingEmail, list[RecipientRow]]] = []
    for row in rows:
        found = records.get(row["id"], [])
        if len(found) < 2:
            own = recipients[row["id"]]
            views.append((OutgoingEmail.from_row(row, own), own))
            continue
        parts = tuple(
            OutgoingEmail.from_row(row if r["id"] == row["id"] else r, recipients[r["id"]])
            for r in found
        )
        every = _every_recipient([recipients[r["id"]] for r in found])
        views.append((OutgoingEmail.from_row(row, every, parts), every))
    return views


def _every_recipient(per_record: list[list[RecipientRow]]) -> list[RecipientRow]:
    """The message's recipients in order of first appearance, each as the latest record
    that carries it has it (recipients a server deferred are delivered by the record
    split off for them)."""
    latest: dict[str, RecipientRow] = {}
    for recipients in per_record:
        for recipient in recipients:
            latest[recipient["address"]] = recipient
    return list(latest.values())


def cancel_result(store: OutboxRecordsStore, outcome: CancelOutcome) -> CancelledEmail:
    """The public result of a cancel that moved at least one record."""
    asked = message_views(store, [outcome.record])[0]
    begun = [row for row, _ in outcome.refused if row["stage"] not in _FINAL]
    finished = [row for row, _ in outcome.refused if row["stage"] in _FINAL]
    fields = {name: getattr(asked, name) for name in asked.__dataclass_fields__}
    return CancelledEmail(
        **fields,
        cancelled=_records(store, outcome.cancelled),
        begun=_records(store, begun),
        finished=_records(store, finished),
    )


def _records(store: OutboxRecordsStore, rows: Sequence[EmailRow]) -> tuple[OutgoingEmail, ...]:
    """Each row as one record with its own recipients (a root too, not as its message)."""
    recipients = store.recipients([row["id"] for row in rows])
    return tuple(OutgoingEmail.from_row(row, recipients[row["id"]]) for row in rows)


def refusal(email_id: int, outcome: CancelOutcome) -> IllegalTransition:
    """Why a cancel of a message of several records moved none of them, part by part."""
    said = []
    for row, delivering in outcome.refused:
        if row["stage"] == _RECORDED and delivering:
            why = "a worker is delivering it right now"
        elif row["stage"] == _RECORDED and row["body_transmissions"] > 0:
            why = "its body already went out (give it up with mf.outbox.resolve)"
        else:
            why = f"it is {row['stage']}"
        said.append(f"part {row['id']}: {why}")
    return IllegalTransition(
        f"cannot cancel outgoing email {email_id}: none of its parts can be cancelled "
        f"({'; '.join(said)}); only Recorded parts that no worker is delivering and whose "
        "body never went out are cancelled; nothing changed",
        current=outcome.record["stage"],
        target=OutgoingEmailStage.CANCELLED.value,
        allowed_from=(_RECORDED,),
    )

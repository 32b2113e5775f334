"""What each dialect's statements can do in one go, said once per dialect.

Internal. The store chooses between two ways of doing one thing (a batch in one
statement or row by row, a claim per queue or for all queues at once …) by reading a
:class:`Capabilities` flag, never by asking whether a query name exists: renaming a
statement then fails at load (:func:`check_capabilities`) instead of silently
switching to the other path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

__all__ = ["CAPABILITIES", "STATEMENTS", "Capabilities", "check_capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """One dialect's choices; each flag is named by what it means for the store."""

    #: ``insert_jobs``: a keyed batch in one statement, returning only the new ids.
    batch_insert_returning_ids: bool
    #: ``insert_keyless_jobs``: a batch without keys in one statement that commits itself;
    #: ``insert_keyless_job``: one job without a key as a plain insert (no ON CONFLICT).
    keyless_batch_insert: bool
    #: ``record_email``: the record, its recipients and its delivery job in one statement;
    #: ``record_emails``: a batch of records without keys, all of that, in one statement;
    #: ``record_emails_keyed``: the same for a batch with idempotency keys.
    record_email_in_one_statement: bool
    #: ``start_attempts`` returns each record's owed recipients on its row; without it an
    #: attempt starts with ``begin_attempt`` and reads them with ``owed_recipients_of``.
    attempts_start_in_one_statement: bool
    #: ``start_attempts`` counts the attempts of delivery jobs inside the claim.
    attempts_counted_at_claim: bool
    #: ``end_attempt_whole``: an attempt's end (no split) in one statement that commits
    #: itself; without it, ``end_attempt`` and the record's other rows one by one.
    end_attempt_in_one_statement: bool
    #: ``repack_*``: compacting jobs rewrites their rows in place (SQLite's pages).
    repack_jobs: bool
    #: ``plan_claims``: a setting that makes the claim's plan walk the claim-order index.
    claim_plan_setting: bool
    #: ``claim_jobs_in_one_queue*``: the claim for several queues is one block per queue
    #: joined by UNION ALL (else one statement takes the queues as an array).
    claim_block_per_queue: bool
    #: ``notify_jobs``: released jobs wake the waiting workers at once.
    notifies_workers: bool
    #: ``flow_lock``, ``prune_lock``: fleet-wide transaction-scoped locks.
    advisory_locks: bool


#: For each flag: the statements that exist exactly when it is on, and exactly when off.
STATEMENTS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "batch_insert_returning_ids": (frozenset({"insert_jobs"}), frozenset()),
    "keyless_batch_insert": (
        frozenset({"insert_keyless_jobs", "insert_keyless_job"}),
        frozenset(),
    ),
    "record_email_in_one_statement": (
        frozenset({"record_email", "record_emails", "record_emails_keyed"}),
        frozenset(),
    ),
    "attempts_start_in_one_statement": (
        frozenset(),
        frozenset({"begin_attempt", "owed_recipients_of"}),
    ),
    "attempts_counted_at_claim": (frozenset({"start_attempts"}), frozenset()),
    "end_attempt_in_one_statement": (
        frozenset({"end_attempt_whole"}),
        frozenset({"end_attempt"}),
    ),
    "repack_jobs": (
        frozenset({"repack_copy", "repack_jobs", "repack_restore", "repack_drop"}),
        frozenset(),
    ),
    "claim_plan_setting": (frozenset({"plan_claims"}), frozenset()),
    "claim_block_per_queue": (
        frozenset({"claim_jobs_in_one_queue", "claim_jobs_in_one_queue_unlimited"}),
        frozenset({"claim_jobs_in_queues_unlimited"}),
    ),
    "notifies_workers": (frozenset({"notify_jobs"}), frozenset()),
    "advisory_locks": (frozenset({"flow_lock", "prune_lock"}), frozenset()),
}

CAPABILITIES: Mapping[str, Capabilities] = {
    "sqlite": Capabilities(
        batch_insert_returning_ids=False,
        keyless_batch_insert=False,
        record_email_in_one_statement=False,
        attempts_start_in_one_statement=False,
        attempts_counted_at_claim=True,
        end_attempt_in_one_statement=False,
        repack_jobs=True,
        claim_plan_setting=False,
        claim_block_per_queue=True,
        notifies_workers=False,
        advisory_locks=False,
    ),
    "postgresql": Capabilities(
        batch_insert_returning_ids=True,
        keyless_batch_insert=True,
        record_email_in_one_statement=True,
        attempts_start_in_one_statement=True,
        attempts_counted_at_claim=True,
        end_attempt_in_one_statement=True,
        repack_jobs=False,
        claim_plan_setting=True,
        claim_block_per_queue=False,
        notifies_workers=True,
        advisory_locks=True,
    ),
}


def check_capabilities(capabilities: Capabilities, names: frozenset[str] | set[str]) -> None:
    """Raise :class:`ValueError` unless ``names`` (a dialect's statements) hold exactly
    the statements ``capabilities`` call for: each flag that is on has its statements,
    and a statement that only a flag's other setting uses does not exist."""
    problems: list[str] = []
    for field in fields(Capabilities):
        on = bool(getattr(capabilities, field.name))
        when_on, when_off = STATEMENTS[field.name]
        needed, banned = (when_on, when_off) if on else (when_off, when_on)
        for name in sorted(needed - names):
            problems.append(f"{field.name}={on} needs statement {name!r}, which is missing")
        for name in sorted(banned & names):
            problems.append(f"{field.name}={on} rules out statement {name!r}, which exists")
    if problems:
        raise ValueError("; ".join(problems))

"""The ``ClaimsStore`` protocol: what callers ask of the claims repository.

Internal. :class:`~mailfathom.store.claims.repository.ClaimsRepository` implements it for
every dialect; callers depend on this protocol, not on the class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from mailfathom.store.base import FailedAttempt, JobRow

__all__ = ["ClaimsStore"]


class ClaimsStore(Protocol):
    """Claims and leases: what a worker asks to take, keep and finish jobs.

    Every write is one transaction.
    """

    def claim(
        self,
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None = None,
        reap: bool = True,
        queue_limits: Mapping[str, int] | None = None,
        live: Sequence[tuple[int, int]] = (),
        kinds: Sequence[str] | None = None,
    ) -> list[JobRow]:
        """Lease up to ``limit`` due jobs to ``owner``, after returning expired leases
        (unless ``reap`` is False: a busy worker reaps on a timer, not on every claim),
        except ``owner``'s own ``live`` (id, attempt) leases, which it renews.
        ``queue_limits`` (per-queue slots) leases up to that many of each queue instead.
        Flow-control limits (``mf_flow_limits``) hold whichever way jobs are claimed.
        ``kinds`` (None: every kind): only due jobs of those kinds are leased; a job of
        another kind stays Pending, no attempt spent."""
        ...

    def renew_leases(
        self, *, owner: str, held: Sequence[tuple[int, int]], lease_until: datetime
    ) -> tuple[set[int], dict[int, str]]:
        """Renew the leases on ``(job id, attempt)`` pairs, never to an earlier expiry than
        they have, and in the same one statement learn which jobs an operator asked to
        abort: ``(ids still held, {id: abort reason})``."""
        ...

    def release_unstarted(
        self, *, owner: str, held: Sequence[tuple[int, int]], now: datetime
    ) -> set[int]:
        """Give back ``(job id, attempt)`` leases of jobs ``owner`` claimed and never
        started: Pending again at once, the claim's attempt not counted, no attempt
        recorded; a job an operator asked to abort meanwhile is dead-lettered at ``now``
        instead (it never starts). Returns the ids released (a lease that moved on is
        left alone)."""
        ...

    def record_outcomes(
        self,
        *,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]] = (),
        failed: Sequence[FailedAttempt] = (),
        results: Mapping[int, str] | None = None,
    ) -> set[int]:
        """Record finished attempts in one transaction; return the ids whose lease was lost.
        ``results``: the JSON text of a succeeded job's result by job id (none: no result),
        written by the statement that marks it Succeeded."""
        ...

    def record_and_claim(
        self,
        *,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]],
        failed: Sequence[FailedAttempt],
        limit: int,
        lease_until: datetime,
        queues: Sequence[str] | None = None,
        reap: bool = True,
        queue_limits: Mapping[str, int] | None = None,
        live: Sequence[tuple[int, int]] = (),
        results: Mapping[int, str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> tuple[set[int], list[JobRow]]:
        """``record_outcomes`` then ``claim`` in one transaction: a busy worker's loop
        commits once per batch. Returns the lost ids and the claimed jobs."""
        ...

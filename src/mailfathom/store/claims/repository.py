"""The claims repository: claims, leases and outcomes, written once for every SQL dialect.

Internal. Runs the dialect's named queries (``jobs.sql``, ``flow.sql``) and converts
values through the :class:`~mailfathom.store.database.Database`. A claim leases due
jobs in claim order (per-queue slots and flow-control limits applied), runs the hooks
other parts registered for the jobs it leased (the outbox counts delivery attempts
there), and records the outcomes that waited, all in one transaction; leases are
renewed, given back unstarted, or reaped once their worker is gone; outcomes are
recorded only for the (id, attempt) its owner still holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from mailfathom.store.base import FailedAttempt, JobRow
from mailfathom.store.database import Cursor, Database
from mailfathom.store.flow.repository import FlowClaims
from mailfathom.store.jobs.rows import JobRows

__all__ = ["ClaimHook", "ClaimsRepository", "OutcomeHook", "ReleaseHook"]

#: Who reaps in a claim's transaction: the claimer, and the (id, attempt) leases it holds
#: and renews (never reaped by itself).
Reaping = tuple[str, Sequence[tuple[int, int]]]
#: Work done in a claim's transaction on the jobs of one kind it leased (add_claim_hook).
ClaimHook = Callable[[Cursor, list[JobRow], datetime], Callable[[], None] | None]
#: Work done in the transaction that gives claims back unstarted, on their (id, attempt)
#: pairs (add_release_hook): what a claim hook did for them is undone there.
ReleaseHook = Callable[[Cursor, list[tuple[int, int]]], Callable[[], None] | None]
#: Runs in every transaction that records attempts' outcomes, before them, with their
#: (job id, attempt) pairs (:meth:`ClaimsRepository.add_outcome_hook`).
OutcomeHook = Callable[[Cursor, list[tuple[int, int]]], Callable[[], None] | None]


class ClaimsRepository:
    """Claims and leases: what a worker asks of the store to take, keep and finish jobs."""

    def __init__(
        self,
        database: Database,
        *,
        flow: FlowClaims,
        rows: JobRows,
        clock_skew: timedelta,
    ) -> None:
        self.db = database
        self.dialect = database.dialect
        #: A lease is expired only once ``lease_expires_at + clock_skew <= now``.
        self.clock_skew = clock_skew
        #: Flow control: limit definitions and the limited claim (flow/repository.py).
        self.flow = flow
        self._q = database.queries
        self._caps = database.capabilities
        self._jobs = rows.jobs
        #: What makes a claim's plan walk the claim-order index whatever the statistics
        #: say (PostgreSQL's ``plan_claims``; SQLite's claims name their index).
        self._plan_claims = self._q["plan_claims"] if self._caps.claim_plan_setting else None
        self._queue_claims: dict[int, str] = {}  # claim_jobs_in_queues by queue count
        self._claim_hooks: dict[str, ClaimHook] = {}
        self._release_hooks: list[ReleaseHook] = []
        self._outcome_hooks: list[OutcomeHook] = []

    # -- claims and leases -------------------------------------------------------------

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
        """Return expired leases to the queue (when ``reap``; ``owner``'s ``live`` leases
        excepted), then lease up to ``limit`` due jobs (with ``queue_limits``, up to that
        many of each queue instead) of ``kinds`` (None: of every kind)."""
        _, claimed = self.record_and_claim(
            owner=owner,
            now=now,
            succeeded=(),
            failed=(),
            limit=limit,
            lease_until=lease_until,
            queues=queues,
            reap=reap,
            queue_limits=queue_limits,
            live=live,
            kinds=kinds,
        )
        return claimed

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
        """:meth:`record_outcomes` then :meth:`claim`, in one transaction (one commit);
        the claim planned by the dialect's ``plan_claims`` when it has one. ``live``: the
        (id, attempt) leases ``owner`` holds and renews, which its reaping leaves alone.
        ``kinds``: the kinds ``owner`` has handlers for; a due job of any other kind is
        not claimed (it stays Pending, no attempt spent). None claims every kind."""
        wanted = None if kinds is None else sorted(set(kinds))
        # Pipelined: the plan setting and the claim go out with BEGIN, COMMIT with the
        # end, so an idle worker's claim after a wake-up waits for two round trips.
        with self.db.transaction(pipelined=True) as cur:
            lost, recorded = self._record(cur, owner, now, succeeded, failed, results=results)
            reaping = (owner, live) if reap else None
            if self._plan_claims is not None:
                cur.execute(self._plan_claims)
            if queue_limits is not None:
                claimed = self._claim_slots(
                    cur,
                    owner=owner,
                    now=now,
                    lease_until=lease_until,
                    queue_limits=queue_limits,
                    reap=reaping,
                    kinds=wanted,
                )
            else:
                claimed = self._claim(
                    cur,
                    owner=owner,
                    limit=limit,
                    now=now,
                    lease_until=lease_until,
                    queues=queues,
                    reap=reaping,
                    kinds=wanted,
                )
            after = self._run_claim_hooks(cur, claimed, now) if self._claim_hooks else []
        for committed in [*recorded, *after]:
            committed()
        return lost, claimed

    def add_claim_hook(self, kind: str, hook: ClaimHook) -> None:
        """Run ``hook(cursor, rows, now)`` inside every claim's transaction that leases jobs
        of ``kind`` (``rows``: those jobs, in claim order), before it commits; what the hook
        returns (if not None) is called once that transaction has committed.

        The outbox counts its deliveries' attempts there: one commit for the whole claimed
        batch instead of one per message. A hook that raises fails the claim (nothing is
        leased).
        """
        self._claim_hooks[kind] = hook

    def add_outcome_hook(self, hook: OutcomeHook) -> None:
        """Run ``hook(cursor, pairs)`` inside every transaction that records finished
        attempts (``pairs``: their (job id, attempt), succeeded and failed), before their
        outcomes are written; what the hook returns (if not None) is called once that
        transaction has committed.

        The outbox writes a delivery's Sent there: the answer and the job's completion
        commit together, one commit for the whole batch. A hook that raises fails the
        recording (the worker then records the outcomes one by one).
        """
        self._outcome_hooks.append(hook)

    def _run_claim_hooks(
        self, cur: Cursor, claimed: list[JobRow], now: datetime
    ) -> list[Callable[[], None]]:
        after: list[Callable[[], None]] = []
        for kind, hook in self._claim_hooks.items():
            rows = [row for row in claimed if row["kind"] == kind]
            if rows:
                committed = hook(cur, rows, now)
                if committed is not None:
                    after.append(committed)
        return after

    def _claim_slots(
        self,
        cur: Cursor,
        *,
        owner: str,
        now: datetime,
        lease_until: datetime,
        queue_limits: Mapping[str, int],
        reap: Reaping | None,
        kinds: Sequence[str] | None,
    ) -> list[JobRow]:
        """Per-queue slots: up to ``queue_limits[q]`` jobs of each queue ``q``."""
        claimed: list[JobRow] = []
        for queue, limit in queue_limits.items():
            if limit > 0:
                claimed += self._claim(
                    cur,
                    owner=owner,
                    limit=limit,
                    now=now,
                    lease_until=lease_until,
                    queues=[queue],
                    reap=reap,
                    kinds=kinds,
                )
                reap = None  # once per transaction
        claimed.sort(key=_claim_order)
        return claimed

    def _claim(
        self,
        cur: Cursor,
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None,
        reap: Reaping | None,
        kinds: Sequence[str] | None,
    ) -> list[JobRow]:
        limits = self.flow.active(cur)
        if limits:
            if reap is not None:
                self._reap(cur, now, *reap)
            return self._flow_claim(
                cur,
                limits,
                owner=owner,
                limit=limit,
                now=now,
                lease_until=lease_until,
                queues=queues,
                kinds=kinds,
            )
        params: dict[str, Any] = {
            "owner": owner,
            "limit": limit,
            "now": self.db.time_param(now),
            "lease_until": self.db.time_param(lease_until),
            "kinds": None if kinds is None else self.db.list_param(kinds),
        }
        if queues is None:
            query = self._q["claim_jobs"]
        else:
            named = list(dict.fromkeys(queues))  # each queue once
            query = self._queue_claim(len(named))
            params["queues"] = self.db.list_param(named)
            params.update({f"queue_{n}": queue for n, queue in enumerate(named)})
        if reap is not None:
            self._reap(cur, now, *reap)
        cur.execute(query, params)
        claimed = self._jobs(cur.fetchall())
        claimed.sort(key=_claim_order)
        return claimed

    def _flow_claim(
        self,
        cur: Cursor,
        limits: Any,
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None,
        kinds: Sequence[str] | None,
    ) -> list[JobRow]:
        """With limits defined: the first ``limit`` due jobs in one claim order, limited
        or not, leaving out what a limit holds back. :meth:`FlowClaims.claim`
        (flow/repository.py) leases the limited ones among them; the places the unlimited ones
        keep are then filled by a variant of the plain claim. One transaction."""
        rows = self.flow.claim(
            cur,
            limits,
            owner=owner,
            limit=limit,
            now=now,
            lease_until=lease_until,
            queues=queues,
            kinds=kinds,
        )
        params: dict[str, Any] = {
            "owner": owner,
            "limit": limit - len(rows),
            "now": self.db.time_param(now),
            "lease_until": self.db.time_param(lease_until),
            "kinds": None if kinds is None else self.db.list_param(kinds),
            **self.flow.unlimited_params(limits),
        }
        open_queues = (
            None
            if queues is None
            else [q for q in dict.fromkeys(queues) if f"queue:{q}" not in limits]
        )
        if params["limit"] > 0 and open_queues is None:
            cur.execute(self._q["claim_jobs_unlimited"], params)
            rows += cur.fetchall()
        elif params["limit"] > 0 and open_queues:
            params["queues"] = self.db.list_param(open_queues)
            params.update({f"queue_{n}": queue for n, queue in enumerate(open_queues)})
            cur.execute(self._unlimited_queue_claim(len(open_queues)), params)
            rows += cur.fetchall()
        claimed = self._jobs(rows)
        claimed.sort(key=_claim_order)
        return claimed

    def _unlimited_queue_claim(self, count: int) -> str:
        """``claim_jobs_in_queues`` leaving out limited kinds, for ``count`` queues."""
        if not self._caps.claim_block_per_queue:
            return self._q["claim_jobs_in_queues_unlimited"]
        block = self._q["claim_jobs_in_one_queue_unlimited"]
        each = " UNION ALL ".join(block.replace("{n}", str(n)) for n in range(count))
        return self._q["claim_jobs_in_queues"].replace("{each_queue}", each)

    def _queue_claim(self, count: int) -> str:
        """The claim restricted to ``count`` queues. A dialect that defines
        ``claim_jobs_in_one_queue`` gets one block per queue (built once per count)."""
        query = self._q["claim_jobs_in_queues"]
        if not self._caps.claim_block_per_queue:
            return query
        block = self._q["claim_jobs_in_one_queue"]
        built = self._queue_claims.get(count)
        if built is None:
            each = " UNION ALL ".join(block.replace("{n}", str(n)) for n in range(count))
            built = self._queue_claims[count] = query.replace("{each_queue}", each)
        return built

    def _reap(
        self, cur: Cursor, moment: datetime, owner: str, live: Sequence[tuple[int, int]]
    ) -> int:
        """Reap leases that ended at least ``clock_skew`` before ``moment``: a reaper whose
        clock runs ahead of the claimer's (by up to the margin) takes no healthy job. The
        reaper's own ``live`` leases (those its heartbeat renews) are never taken, however
        far its clock has stepped ahead."""
        now = self.db.time_param(moment)
        cutoff = self.db.time_param(moment - self.clock_skew)
        cur.execute(
            self._q["reap_expired_leases"],
            {"now": now, "lease_cutoff": cutoff, "owner": owner, **self._pairs(live)},
        )
        expired = cur.fetchall()
        for row in expired:
            cur.execute(
                self._q["insert_attempt"],
                {
                    "job_id": row["id"],
                    "attempt": row["attempts"],
                    "outcome": "LeaseExpired" if row["abort_reason"] is None else "Aborted",
                    "failure_class": row["failure_class"],
                    "error_type": None,
                    "message": row["failure_reason"],
                    "traceback": None,
                    "worker": row["claimed_by"],
                    "started_at": row["claimed_at"],
                    "finished_at": now,
                },
            )
        return len(expired)

    def renew_leases(
        self, *, owner: str, held: Sequence[tuple[int, int]], lease_until: datetime
    ) -> tuple[set[int], dict[int, str]]:
        """Renew leases still held by ``owner``: their ids, and those an operator asked to
        abort with the request's text (one statement)."""
        if not held:
            return set(), {}
        with self.db.transaction() as cur:
            cur.execute(
                self._q["extend_leases"],
                {
                    "owner": owner,
                    **self._pairs(held),
                    "lease_until": self.db.time_param(lease_until),
                },
            )
            rows = cur.fetchall()
        aborts = {row["id"]: row["abort_reason"] for row in rows if row["abort_reason"]}
        return {row["id"] for row in rows}, aborts

    def release_unstarted(
        self, *, owner: str, held: Sequence[tuple[int, int]], now: datetime
    ) -> set[int]:
        """Jobs claimed by ``owner`` that never started go back to Pending, their attempt
        uncounted (or, asked to abort meanwhile, are dead-lettered: they never start);
        returns the ids released. Idle workers are woken (``NOTIFY`` on PostgreSQL;
        SQLite's watchers see the commit)."""
        if not held:
            return set()
        after: list[Callable[[], None]] = []
        with self.db.transaction() as cur:
            cur.execute(
                self._q["release_unstarted"],
                {"owner": owner, "now": self.db.time_param(now), **self._pairs(held)},
            )
            released = {row["id"] for row in cur.fetchall()}
            if released and self._release_hooks:
                pairs = [(job_id, attempt) for job_id, attempt in held if job_id in released]
                for hook in self._release_hooks:
                    committed = hook(cur, pairs)
                    if committed is not None:
                        after.append(committed)
            notify = self._q["notify_jobs"] if self._caps.notifies_workers else None
            if released and notify is not None:
                cur.execute(notify)
        for committed in after:
            committed()
        return released

    def add_release_hook(self, hook: ReleaseHook) -> None:
        """Run ``hook(cursor, pairs)`` inside every transaction that gives claims back
        unstarted (``release_unstarted``), on the (id, attempt) pairs released; what it
        returns (if not None) is called once that transaction has committed.

        The outbox takes back there the delivery attempts their claim counted
        (:meth:`add_claim_hook`): a job given back unstarted spent no attempt, and neither
        did its message.
        """
        self._release_hooks.append(hook)

    # -- outcomes ----------------------------------------------------------------------

    def record_outcomes(
        self,
        *,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]] = (),
        failed: Sequence[FailedAttempt] = (),
        results: Mapping[int, str] | None = None,
    ) -> set[int]:
        """Record a batch of finished attempts; returns the ids whose lease was lost.
        ``results``: a succeeded job's result (JSON text) by id, written as it succeeds."""
        with self.db.transaction() as cur:
            lost, recorded = self._record(cur, owner, now, succeeded, failed, results=results)
        for committed in recorded:
            committed()
        return lost

    def _record(
        self,
        cur: Cursor,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]],
        failed: Sequence[FailedAttempt],
        *,
        results: Mapping[int, str] | None = None,
    ) -> tuple[set[int], list[Callable[[], None]]]:
        """Write the outcomes on ``cur``: the ids whose lease was lost, and what the
        outcome hooks want called once the transaction commits."""
        after: list[Callable[[], None]] = []
        if self._outcome_hooks and (succeeded or failed):
            pairs = [*succeeded, *((f.job_id, f.attempt) for f in failed)]
            for hook in self._outcome_hooks:
                committed = hook(cur, pairs)
                if committed is not None:
                    after.append(committed)
        lost: set[int] = set()
        stamp = self.db.time_param(now)
        if succeeded:
            cur.execute(
                self._q["complete_jobs"],
                {
                    "owner": owner,
                    "now": stamp,
                    **self._completions(succeeded, results or {}),
                },
            )
            rows = cur.fetchall()
            done = {row["id"] for row in rows}
            lost.update(job_id for job_id, _ in succeeded if job_id not in done)
            for row in rows:
                if row["abort_reason"] is not None:
                    self._abort_too_late(cur, owner, stamp, row["id"], row["abort_reason"])
        for failure in failed:
            if not self._record_failure(cur, owner, stamp, failure):
                lost.add(failure.job_id)
        return lost, after

    def _abort_too_late(self, cur: Cursor, owner: str, now: Any, job_id: int, abort: str) -> None:
        """An attempt succeeded after an operator asked to abort it (its handler ended before
        it could see the request): the work was done, so the job stays Succeeded, without
        the request on its row; its audit trail says the abort came too late."""
        cur.execute(self._q["clear_late_abort"], {"id": job_id})
        cur.execute(
            self._q["insert_event"],
            {
                "job_id": job_id,
                "at": now,
                "actor": owner,
                "action": "abort_too_late",
                "from_state": "Claimed",
                "to_state": "Succeeded",
                "reason": f"{abort}: the attempt had already succeeded, and stays Succeeded",
            },
        )

    def _pairs(self, pairs: Sequence[tuple[int, int]]) -> dict[str, Any]:
        """(id, attempt) pairs as a statement takes them: PostgreSQL two arrays (``ids``,
        ``attempts``: ``unnest`` sizes them, see complete_jobs), SQLite one JSON array
        (``held``)."""
        if self.db.dialect == "postgresql":
            return {
                "ids": _int_array([pair[0] for pair in pairs]),
                "attempts": _int_array([pair[1] for pair in pairs]),
            }
        return {"held": self.db.list_param([list(pair) for pair in pairs])}

    def _completions(
        self, pairs: Sequence[tuple[int, int]], results: Mapping[int, str]
    ) -> dict[str, Any]:
        """``complete_jobs``' parameters: the (id, attempt) pairs as :meth:`_pairs` binds
        them, with each job's result text (None: no result) beside them, so that one
        statement marks the batch Succeeded and writes the results."""
        get = results.get
        if self.db.dialect == "postgresql":
            # one text, a line per job ('' for none): psycopg spends ~30 µs quoting each
            # string of a text[] (compact JSON holds no newline: it escapes every one)
            return {
                "ids": _int_array([pair[0] for pair in pairs]),
                "attempts": _int_array([pair[1] for pair in pairs]),
                "results": "\n".join([get(pair[0]) or "" for pair in pairs]),
            }
        return {"held": self.db.list_param([[pair[0], pair[1], get(pair[0])] for pair in pairs])}

    def _record_failure(self, cur: Cursor, owner: str, now: Any, failure: FailedAttempt) -> bool:
        params: dict[str, Any] = {
            "id": failure.job_id,
            "attempt": failure.attempt,
            "owner": owner,
            "now": now,
            "failure_class": failure.failure_class,
            "failure_reason": failure.message,
        }
        if failure.snoozed:
            params["retry_at"] = self.db.time_param(failure.retry_at)
            cur.execute(self._q["snooze_job"], params)
        elif failure.retry_at is None:
            cur.execute(self._q["dead_letter_job"], params)
        else:
            params["retry_at"] = self.db.time_param(failure.retry_at)
            cur.execute(self._q["retry_job"], params)
        if cur.fetchone() is None:
            return False
        cur.execute(
            self._q["insert_attempt"],
            {
                "job_id": failure.job_id,
                "attempt": failure.attempt,
                "outcome": failure.outcome,
                "failure_class": failure.failure_class,
                "error_type": failure.error_type,
                "message": failure.message,
                "traceback": failure.traceback,
                "worker": owner,
                "started_at": self.db.time_param(failure.started_at),
                "finished_at": now,
            },
        )
        return True


def _int_array(values: list[int]) -> str:
    """Integers as a PostgreSQL array literal (``{1,2,3}``), which the statement casts
    (``:ids::bigint[]``). psycopg dumps a Python list element by element in Python (about
    1.5 µs each, after a pass over the list to size its integers): for a batch of 100
    outcomes the two lists cost more than the rest of the completion's client work."""
    return "{" + ",".join(map(str, values)) + "}"


def _claim_order(job: JobRow) -> tuple[int, datetime | None, int]:
    return (-job["priority"], job["available_at"], job["id"])

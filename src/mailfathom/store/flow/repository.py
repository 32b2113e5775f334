"""Flow control in the store: limit definitions, the limited claim, and their usage.

Internal, used by the jobs and claims repositories. While no limit is
defined, the claim is exactly the plain one (this module only re-reads
``mf_flow_limits`` once a second). With limits, a limit only ever holds a job back: the
claim takes the first jobs of one claim order (priority, due time, id) across limited
and unlimited kinds, leaving out those a limit holds back. Its transaction

1. reads the first due jobs in claim order; when none of them is limited, the claim is
   the unlimited one below: no lock is taken, nothing counted;
2. takes the flow lock (PostgreSQL: an advisory transaction lock; SQLite's write
   lock serialises claims already), so no two claimers both see a free slot;
3. counts what each limit uses: Claimed jobs (a dead worker's jobs count until
   their lease is reaped) and starts in each rate's sliding window (trimming what
   left the window);
4. reads due jobs in claim order, limited and unlimited, leaving out those under a
   used-up limit (so a busy kind or key never hides the jobs behind it); walks them
   in that order, each unlimited job keeping its place, and picks the limited ones
   every limit has room for, until the claim is full; leases them and writes one
   starts row per rate the job falls under;
5. leaves the places the unlimited jobs kept to the caller's unlimited claim
   (``claim_jobs_unlimited``: in claim order, locked rows skipped).

Rate windows are judged on one clock, the database's (PostgreSQL's
``clock_timestamp()``, read under the flow lock; for SQLite, whose claimers all run on
the machine holding the file, that machine's clock): the starts rows are stamped with
it and every window is measured on it, so the claimers' own clocks may disagree (by the
``clock_skew`` margin or more) without a rate letting more through or holding back
longer. A store given a ``database_clock`` (an app on a FakeClock) uses that instead.
Everything else (due times, leases) uses the store's ``now``, the injected clock.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mailfathom.clock import Clock
from mailfathom.store.database import Cursor, Database
from mailfathom.store.flow.rows import (
    Limit,
    LimitRow,
    LimitUsageRow,
    limit_rows,
    limit_windows,
    rate_dict,
    read_row,
    row_params,
)

__all__ = ["FlowClaims", "LimitRow", "LimitUsageRow", "limit_rows"]

#: Seconds between re-reads of the limit definitions by a claimer.
REFRESH_SECONDS = 1.0
#: Candidate rows read per job wanted (at most ``_SCAN_MOST``).
_SCAN_FACTOR = 4
_SCAN_MOST = 2000
#: Candidate reads per claim at most (each leaves out what the previous one filled up).
_ROUNDS = 8
#: Jobs listed as waiting on a limit.
WAITING_SHOWN = 100


@dataclass(slots=True)
class _Counts:
    """What the limits use right now, and which are used up."""

    rate_now: datetime | None = None  # the instant rate windows end (the database's)
    running: Counter[str] = field(default_factory=Counter)  # "kind:x" and "kind:x|key"
    starts: Counter[str] = field(default_factory=Counter)
    blocked_kinds: set[str] = field(default_factory=set)
    blocked_queues: set[str] = field(default_factory=set)
    blocked_keys: set[str] = field(default_factory=set)  # "kind:x|key"


class FlowClaims:
    """The flow-control half of a store; see the module docstring."""

    def __init__(self, db: Database, *, database_clock: Clock | None = None) -> None:
        self.db = db
        self._q = db.queries
        self._caps = db.capabilities
        #: What rate windows are judged on: None for the database's own clock (see the
        #: module docstring); a clock given here stands in for it (tests move time).
        self.database_clock = database_clock
        self._limits: dict[str, Limit] = {}
        self._read_at: float | None = None  # time.monotonic() of the last read
        #: The last limited claim left due jobs unclaimed because a limit was used up
        #: (the worker then tries again soon: a slot may free on another machine).
        self.held_back = False

    # -- definitions -------------------------------------------------------------------

    def forget(self) -> None:
        """Re-read the definitions at the next claim (they were just written)."""
        self._read_at = None

    def active(self, cur: Cursor) -> dict[str, Limit]:
        """The limits in force, re-read at most every ``REFRESH_SECONDS`` (empty: none)."""
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= REFRESH_SECONDS:
            self._limits = self._read(cur)
            self._read_at = now
        return self._limits

    def _read(self, cur: Cursor) -> dict[str, Limit]:
        cur.execute(self._q["flow_limits"], {})
        limits: dict[str, Limit] = {}
        rows = [read_row(found) for found in cur.fetchall()]
        for row in rows:
            if row.limit_key is None:
                limits[row.base] = Limit(row)
        for row in rows:
            if row.limit_key is not None:
                base = limits.setdefault(row.base, Limit(LimitRow(row.scope, row.target)))
                base.keys[row.limit_key] = row
        return limits

    def definitions(self) -> list[LimitRow]:
        """Every stored limit row, by name (a fresh read)."""
        with self.db.reading() as cur:
            cur.execute(self._q["flow_limits"], {})
            return [read_row(found) for found in cur.fetchall()]

    def write(
        self,
        limits: Sequence[LimitRow],
        *,
        now: datetime,
        owned: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Upsert ``limits``; for each ``(scope, target)`` in ``owned`` (a kind this code
        registers), rows not in ``limits`` are deleted, so a limit removed from the code
        is removed from the fleet. One transaction."""
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            for scope, target in owned:
                keep = [row.name for row in limits if (row.scope, row.target) == (scope, target)]
                cur.execute(
                    self._q["flow_delete_limits"],
                    {"scope": scope, "target": target, "keep": self.db.list_param(keep)},
                )
            for row in limits:
                cur.execute(self._q["flow_upsert_limit"], {**row_params(row), "now": stamp})
        self.forget()

    def remove(self, scope: str, target: str) -> bool:
        """Delete every row of one kind's or queue's limits; whether there were any."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["flow_delete_limits"],
                {"scope": scope, "target": target, "keep": self.db.list_param([])},
            )
            gone = cur.rowcount > 0
        self.forget()
        return gone

    def set_keys(self, cur: Cursor, keys: Sequence[tuple[int, str]]) -> None:
        """Store the limit keys of just-inserted jobs (``(id, key)`` pairs)."""
        if keys:
            cur.execute(
                self._q["flow_set_keys"], {"keys": self.db.list_param([list(k) for k in keys])}
            )

    # -- the claim ---------------------------------------------------------------------

    def unlimited_params(self, limits: Mapping[str, Limit]) -> dict[str, Any]:
        """The ``flow_kinds``/``flow_queues`` parameters of the unlimited claim variants."""
        kinds = [lim.whole.target for lim in limits.values() if lim.whole.scope == "kind"]
        queues = [lim.whole.target for lim in limits.values() if lim.whole.scope == "queue"]
        return {"flow_kinds": self.db.list_param(kinds), "flow_queues": self.db.list_param(queues)}

    def claim(
        self,
        cur: Cursor,
        limits: Mapping[str, Limit],
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None,
        kinds: Sequence[str] | None = None,
    ) -> list[Any]:
        """Lease the limited jobs among the first ``limit`` due jobs in claim order that
        every limit lets start now (raw rows). The unlimited jobs among those keep their
        places: the caller claims ``limit`` minus what this leased of them, in claim
        order (``claim_jobs_unlimited``), in the same transaction. ``kinds``: only jobs
        of those kinds are seen at all (None: every kind)."""
        self.held_back = False
        if limit <= 0:
            return []
        base: dict[str, Any] = self.unlimited_params(limits)
        base["now"] = self.db.time_param(now)
        base["queues"] = None if queues is None else self.db.list_param(list(queues))
        base["kinds"] = None if kinds is None else self.db.list_param(list(kinds))
        if not self._limited_ahead(cur, base, limit):
            return []  # every place goes to an unlimited job: no lock, nothing counted
        lock = self._q["flow_lock"] if self._caps.advisory_locks else None
        if lock is not None:
            cur.execute(lock, {})
        counts = self._counts(cur, limits, self.rate_time(cur, limits), trim=True)
        room = _room(limits, counts)
        if room == 0:  # every limit is used up: no limited job can start
            self.held_back = True
            return []
        most = limit if room is None else min(limit, room)
        claimed: list[Any] = []
        starts: list[list[Any]] = []
        for _ in range(_ROUNDS):
            blocked = self._blocked_params(counts)
            scan = min((limit - len(claimed)) * _SCAN_FACTOR, _SCAN_MOST)
            cur.execute(self._q["flow_candidates"], {**base, **blocked, "scan": scan})
            rows = cur.fetchall()
            picked: list[int] = []
            kept = 0  # places of unlimited jobs ahead, left to the caller's claim
            for row in rows:
                taken = len(claimed) + len(picked)
                if taken + kept >= limit or taken >= most:
                    break
                if not row["limited"]:
                    kept += 1
                    continue
                fits = self._fits(limits, counts, row["kind"], row["queue"], row["limit_key"])
                if fits is not None:
                    picked.append(row["id"])
                    starts.extend([*start, row["id"]] for start in fits)
            taken = len(claimed) + len(picked)
            full = taken + kept >= limit or taken >= most
            if picked:
                claimed += self._lease(cur, picked, owner, now, lease_until)
            for lim in limits.values():
                self._block(lim, counts)
            if full or len(rows) < scan:
                break  # the claim is full, or every due job was seen
            if not picked and blocked == self._blocked_params(counts):
                break  # nothing more can start
        self.held_back = bool(counts.blocked_kinds or counts.blocked_queues or counts.blocked_keys)
        got = {row["id"] for row in claimed}
        rows_ = [start for start in starts if start[2] in got]
        if rows_:
            cur.execute(
                self._q["flow_insert_starts"],
                {"rows": self.db.list_param(rows_), "now": self.db.time_param(counts.rate_now)},
            )
        return claimed

    def _limited_ahead(self, cur: Cursor, base: Mapping[str, Any], limit: int) -> bool:
        """Whether a limited job is among the first ``limit`` due jobs in claim order (a
        read without the flow lock: when none is, a claim of unlimited jobs waits for
        no other claimer)."""
        nothing = self.db.list_param([])
        cur.execute(
            self._q["flow_candidates"],
            {
                **base,
                "blocked_kinds": nothing,
                "blocked_queues": nothing,
                "blocked_keys": nothing,
                "scan": limit,
            },
        )
        return any(row["limited"] for row in cur.fetchall())

    def rate_time(self, cur: Cursor, limits: Mapping[str, Limit]) -> datetime | None:
        """The instant rate windows are judged at: the database's clock (or the
        ``database_clock`` standing in for it); None when no limit has a rate."""
        if not any(limit_windows(lim) for lim in limits.values()):
            return None
        if self.database_clock is not None:
            return self.database_clock.now()
        cur.execute(self._q["flow_clock"], {})
        moment = self.db.time_value(cur.fetchone()["now"])
        assert moment is not None
        return moment

    def _lease(
        self, cur: Cursor, ids: list[int], owner: str, now: datetime, lease_until: datetime
    ) -> list[Any]:
        cur.execute(
            self._q["flow_claim_ids"],
            {
                "ids": self.db.list_param(ids),
                "owner": owner,
                "now": self.db.time_param(now),
                "lease_until": self.db.time_param(lease_until),
            },
        )
        return cur.fetchall()

    def _fits(
        self,
        limits: Mapping[str, Limit],
        counts: _Counts,
        kind: str,
        queue: str,
        key: str | None,
    ) -> list[tuple[str, str]] | None:
        """If a job of ``kind``/``queue``/``key`` may start, count it in and return the
        starts rows it needs ``(limit name, key)``; None when a limit is used up."""
        applying = [lim for lim in (limits.get(f"kind:{kind}"), limits.get(f"queue:{queue}"))]
        checks: list[tuple[str, int | None, int | None]] = []  # (counter, running max, rate)
        for lim in applying:
            if lim is None:
                continue
            base = lim.whole.base
            checks.append((base, lim.whole.max_running, lim.whole.rate_count))
            if key is not None and lim.per_key:
                most, rate, _ = lim.key_values(key)
                checks.append((f"{base}|{key}", most, rate))
        for counter, most, rate in checks:
            if most is not None and counts.running[counter] >= most:
                return None
            if rate is not None and counts.starts[counter] >= rate:
                return None
        rows: list[tuple[str, str]] = []
        for counter, _, rate in checks:
            counts.running[counter] += 1
            if rate is not None:
                counts.starts[counter] += 1
                base, _, own = counter.partition("|")
                rows.append((base, own))
        return rows

    def _counts(
        self, cur: Cursor, limits: Mapping[str, Limit], rate_now: datetime | None, *, trim: bool
    ) -> _Counts:
        """Running jobs and starts in each window ending at ``rate_now`` (the database's
        clock: :meth:`rate_time`), and which limits are used up."""
        counts = _Counts(rate_now=rate_now)
        params = self.unlimited_params(limits)
        cur.execute(
            self._q["flow_running"],
            {"kinds": params["flow_kinds"], "queues": params["flow_queues"]},
        )
        for row in cur.fetchall():
            n = int(row["n"])
            for scope, target in (("kind", row["kind"]), ("queue", row["queue"])):
                lim = limits.get(f"{scope}:{target}")
                if lim is None:
                    continue
                counts.running[lim.whole.base] += n
                if row["limit_key"] is not None:
                    counts.running[f"{lim.whole.base}|{row['limit_key']}"] += n
        for lim in limits.values():
            if rate_now is not None:
                self._rate_counts(cur, lim, rate_now, counts, trim=trim)
            self._block(lim, counts)
        return counts

    def _rate_counts(
        self, cur: Cursor, lim: Limit, now: datetime, counts: _Counts, *, trim: bool
    ) -> None:
        base, whole = lim.whole.base, lim.whole
        longest = max(limit_windows(lim), default=None)
        if longest is None:
            return
        if trim:
            cur.execute(
                self._q["flow_trim_starts"],
                {"name": base, "cutoff": self.db.time_param(now - longest)},
            )
        if whole.rate_window is not None:
            cur.execute(
                self._q["flow_starts_whole"],
                {"name": base, "since": self.db.time_param(now - whole.rate_window)},
            )
            counts.starts[base] = int(cur.fetchone()["n"])
        own_keys = sorted(key for key, row in lim.keys.items() if row.rate_per_key_window)
        own_keys_set = set(own_keys)
        groups: list[tuple[timedelta, list[str] | None]] = []
        if whole.rate_per_key_window is not None:
            groups.append((whole.rate_per_key_window, None))  # every key; own keys redone
        for key in own_keys:
            window = lim.keys[key].rate_per_key_window
            assert window is not None
            groups.append((window, [key]))
        for window, keys in groups:
            cur.execute(
                self._q["flow_starts_keys"],
                {
                    "name": base,
                    "since": self.db.time_param(now - window),
                    "keys": None if keys is None else self.db.list_param(keys),
                },
            )
            for row in cur.fetchall():
                if keys is None and row["limit_key"] in own_keys_set:
                    continue  # its own window is counted on its own
                counts.starts[f"{base}|{row['limit_key']}"] = int(row["n"])

    def _block(self, lim: Limit, counts: _Counts) -> None:
        """Mark what ``lim`` lets nothing more start of."""
        whole, base = lim.whole, lim.whole.base
        full = (whole.max_running is not None and counts.running[base] >= whole.max_running) or (
            whole.rate_count is not None and counts.starts[base] >= whole.rate_count
        )
        if full:
            (counts.blocked_kinds if whole.scope == "kind" else counts.blocked_queues).add(
                whole.target
            )
        if not lim.per_key:
            return
        prefix = f"{base}|"
        used = {c for c in (*counts.running, *counts.starts) if c.startswith(prefix)}
        for counter in used:
            most, rate, _ = lim.key_values(counter[len(prefix) :])
            if (most is not None and counts.running[counter] >= most) or (
                rate is not None and counts.starts[counter] >= rate
            ):
                counts.blocked_keys.add(counter)

    def _blocked_params(self, counts: _Counts) -> dict[str, Any]:
        return {
            "blocked_kinds": self.db.list_param(sorted(counts.blocked_kinds)),
            "blocked_queues": self.db.list_param(sorted(counts.blocked_queues)),
            "blocked_keys": self.db.list_param(sorted(counts.blocked_keys)),
        }

    # -- usage -------------------------------------------------------------------------

    def usage(self, now: datetime) -> list[LimitUsageRow]:
        """Each limit with its values, its use now and the due jobs waiting on it."""
        with self.db.reading() as cur:
            limits = self._read(cur)
            if not limits:
                return []
            counts = self._counts(cur, limits, self.rate_time(cur, limits), trim=False)
            params = self._blocked_params(counts)
            cur.execute(
                self._q["flow_waiting"],
                {**params, "now": self.db.time_param(now), "scan": _SCAN_MOST},
            )
            waiting = cur.fetchall()
        found = []
        for base in sorted(limits):
            lim = limits[base]
            whole = lim.whole
            prefix = f"{base}|"
            keys = sorted(
                {
                    c[len(prefix) :]
                    for c in (*counts.running, *counts.starts)
                    if c.startswith(prefix)
                }
                | set(lim.keys)
            )
            per_key = []
            for key in keys:
                most, rate, window = lim.key_values(key)
                per_key.append(
                    {
                        "key": key,
                        "max_running": most,
                        "rate": rate_dict(rate, window),
                        "running": counts.running[prefix + key],
                        "starts_in_window": counts.starts[prefix + key],
                        "blocked": prefix + key in counts.blocked_keys,
                    }
                )
            mine = [
                row["id"] for row in waiting if _waits_on(row, whole.scope, whole.target, counts)
            ][:WAITING_SHOWN]
            blocked_whole = whole.target in (
                counts.blocked_kinds if whole.scope == "kind" else counts.blocked_queues
            )
            found.append(
                LimitUsageRow(
                    name=base,
                    scope=whole.scope,
                    target=whole.target,
                    max_running=whole.max_running,
                    rate=rate_dict(whole.rate_count, whole.rate_window),
                    max_running_per_key=whole.max_running_per_key,
                    rate_per_key=rate_dict(whole.rate_per_key_count, whole.rate_per_key_window),
                    running=counts.running[base],
                    starts_in_window=counts.starts[base],
                    blocked=blocked_whole,
                    keys=per_key,
                    waiting=mine,
                )
            )
        return found


def _room(limits: Mapping[str, Limit], counts: _Counts) -> int | None:
    """How many limited jobs could start now at most (None: no bound known)."""
    room = 0
    for lim in limits.values():
        whole = lim.whole
        blocked = whole.target in (
            counts.blocked_kinds if whole.scope == "kind" else counts.blocked_queues
        )
        if blocked:
            continue
        if whole.max_running is None:
            return None
        room += whole.max_running - counts.running[whole.base]
    return room


def _waits_on(row: Any, scope: str, target: str, counts: _Counts) -> bool:
    """Whether the due job ``row`` is held back by the limit of ``scope``/``target``."""
    if (row["kind"] if scope == "kind" else row["queue"]) != target:
        return False
    if target in (counts.blocked_kinds if scope == "kind" else counts.blocked_queues):
        return True
    key = row["limit_key"]
    return key is not None and f"{scope}:{target}|{key}" in counts.blocked_keys

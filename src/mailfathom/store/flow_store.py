"""Flow control in the store: limit definitions, the limited claim, and their usage.

Internal, used by :class:`~mailfathom.store.sql_store.SqlStore`. While no limit is
defined, the claim is exactly the plain one (this module only re-reads
``mf_flow_limits`` once a second). With limits, the claim transaction

1. leases unlimited jobs with a variant of the plain claim that leaves the limited
   kinds and queues out (their jobs are never taken without the checks below);
2. takes the flow lock (PostgreSQL: an advisory transaction lock; SQLite's write
   lock serialises claims already), so no two claimers both see a free slot;
3. counts what each limit uses: Claimed jobs (a dead worker's jobs count until
   their lease is reaped) and starts in each rate's sliding window (trimming what
   left the window);
4. reads due limited jobs in claim order, leaving out those under a used-up limit
   (so a busy kind or key never hides the jobs behind it), picks in that order
   while every limit a job falls under has room, leases them, and writes one
   starts row per rate the job falls under.

Every count uses the store's ``now`` (the injected clock), never the server's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mailfathom.store.database import Cursor, Database

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


@dataclass(frozen=True, slots=True)
class LimitRow:
    """One ``mf_flow_limits`` row. ``limit_key`` None: the whole kind or queue (with the
    per-key defaults); otherwise one key's own per-key values."""

    scope: str
    target: str
    limit_key: str | None = None
    max_running: int | None = None
    rate_count: int | None = None
    rate_window: timedelta | None = None
    max_running_per_key: int | None = None
    rate_per_key_count: int | None = None
    rate_per_key_window: timedelta | None = None

    @property
    def base(self) -> str:
        """The limit's name: ``kind:<kind>`` or ``queue:<queue>``."""
        return f"{self.scope}:{self.target}"

    @property
    def name(self) -> str:
        """The row's primary key: the limit's name, then ``|key`` for a key's row."""
        return self.base if self.limit_key is None else f"{self.base}|{self.limit_key}"


class LimitUsageRow(dict[str, Any]):
    """What :meth:`FlowClaims.usage` reports for one limit (a plain dict for the console
    and ``/api``; the keys are listed in FLOW_INTERFACE.md and docs/worker.md)."""


def limit_rows(limit: Any) -> list[LimitRow]:
    """The rows a :class:`~mailfathom.jobs.limits.FlowLimit` is stored as."""
    whole = LimitRow(
        scope=limit.scope,
        target=limit.target,
        max_running=limit.max_running,
        rate_count=limit.rate.count if limit.rate else None,
        rate_window=limit.rate.window if limit.rate else None,
        max_running_per_key=limit.max_running_per_key,
        rate_per_key_count=limit.rate_per_key.count if limit.rate_per_key else None,
        rate_per_key_window=limit.rate_per_key.window if limit.rate_per_key else None,
    )
    rows = [whole]
    for key, own in sorted(limit.key_limits.items()):
        rows.append(
            LimitRow(
                scope=limit.scope,
                target=limit.target,
                limit_key=key,
                max_running_per_key=own.max_running,
                rate_per_key_count=own.rate.count if own.rate else None,
                rate_per_key_window=own.rate.window if own.rate else None,
            )
        )
    return rows


@dataclass(slots=True)
class _Limit:
    """One kind's or queue's limits, its key rows folded in."""

    whole: LimitRow
    keys: dict[str, LimitRow] = field(default_factory=dict)

    def key_values(self, key: str) -> tuple[int | None, int | None, timedelta | None]:
        """(max running, rate count, rate window) for ``key``: each value from the key's
        own row where it sets one, else the per-key default."""
        whole = self.whole
        own = self.keys.get(key)
        if own is None:
            return whole.max_running_per_key, whole.rate_per_key_count, whole.rate_per_key_window
        most = own.max_running_per_key or whole.max_running_per_key
        if own.rate_per_key_count is not None:
            return most, own.rate_per_key_count, own.rate_per_key_window
        return most, whole.rate_per_key_count, whole.rate_per_key_window

    @property
    def per_key(self) -> bool:
        whole = self.whole
        return bool(self.keys or whole.max_running_per_key or whole.rate_per_key_count)


@dataclass(slots=True)
class _Counts:
    """What the limits use right now, and which are used up."""

    running: Counter[str] = field(default_factory=Counter)  # "kind:x" and "kind:x|key"
    starts: Counter[str] = field(default_factory=Counter)
    blocked_kinds: set[str] = field(default_factory=set)
    blocked_queues: set[str] = field(default_factory=set)
    blocked_keys: set[str] = field(default_factory=set)  # "kind:x|key"


class FlowClaims:
    """The flow-control half of a store; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._q = db.queries
        self._limits: dict[str, _Limit] = {}
        self._read_at: float | None = None  # time.monotonic() of the last read
        #: The last limited claim left due jobs unclaimed because a limit was used up
        #: (the worker then tries again soon: a slot may free on another machine).
        self.held_back = False

    # -- definitions -------------------------------------------------------------------

    def forget(self) -> None:
        """Re-read the definitions at the next claim (they were just written)."""
        self._read_at = None

    def active(self, cur: Cursor) -> dict[str, _Limit]:
        """The limits in force, re-read at most every ``REFRESH_SECONDS`` (empty: none)."""
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= REFRESH_SECONDS:
            self._limits = self._read(cur)
            self._read_at = now
        return self._limits

    def _read(self, cur: Cursor) -> dict[str, _Limit]:
        cur.execute(self._q["flow_limits"], {})
        limits: dict[str, _Limit] = {}
        rows = [_row(found) for found in cur.fetchall()]
        for row in rows:
            if row.limit_key is None:
                limits[row.base] = _Limit(row)
        for row in rows:
            if row.limit_key is not None:
                base = limits.setdefault(row.base, _Limit(LimitRow(row.scope, row.target)))
                base.keys[row.limit_key] = row
        return limits

    def definitions(self) -> list[LimitRow]:
        """Every stored limit row, by name (a fresh read)."""
        with self.db.reading() as cur:
            cur.execute(self._q["flow_limits"], {})
            return [_row(found) for found in cur.fetchall()]

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
                cur.execute(self._q["flow_upsert_limit"], {**_params(row), "now": stamp})
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

    def unlimited_params(self, limits: Mapping[str, _Limit]) -> dict[str, Any]:
        """The ``flow_kinds``/``flow_queues`` parameters of the unlimited claim variants."""
        kinds = [lim.whole.target for lim in limits.values() if lim.whole.scope == "kind"]
        queues = [lim.whole.target for lim in limits.values() if lim.whole.scope == "queue"]
        return {"flow_kinds": self.db.list_param(kinds), "flow_queues": self.db.list_param(queues)}

    def claim(
        self,
        cur: Cursor,
        limits: Mapping[str, _Limit],
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None,
    ) -> list[Any]:
        """Lease up to ``limit`` limited jobs that every limit lets start now (raw rows)."""
        self.held_back = False
        if limit <= 0:
            return []
        lock = self._q.get("flow_lock")
        if lock is not None:
            cur.execute(lock, {})
        counts = self._counts(cur, limits, now, trim=True)
        room = _room(limits, counts)
        if room == 0:  # every limit is used up: nothing to read
            self.held_back = True
            return []
        if room is not None:
            limit = min(limit, room)
        base: dict[str, Any] = self.unlimited_params(limits)
        base["now"] = self.db.time_param(now)
        base["queues"] = None if queues is None else self.db.list_param(list(queues))
        claimed: list[Any] = []
        starts: list[list[Any]] = []
        for _ in range(_ROUNDS):
            want = limit - len(claimed)
            if want <= 0:
                break
            blocked = self._blocked_params(counts)
            scan = min(want * _SCAN_FACTOR, _SCAN_MOST)
            cur.execute(self._q["flow_candidates"], {**base, **blocked, "scan": scan})
            rows = cur.fetchall()
            picked: list[int] = []
            for row in rows:
                if len(picked) >= want:
                    break
                fits = self._fits(limits, counts, row["kind"], row["queue"], row["limit_key"])
                if fits is not None:
                    picked.append(row["id"])
                    starts.extend([*start, row["id"]] for start in fits)
            if picked:
                claimed += self._lease(cur, picked, owner, now, lease_until)
            for lim in limits.values():
                self._block(lim, counts)
            if len(rows) < scan or (not picked and blocked == self._blocked_params(counts)):
                break  # every due limited job was seen, or nothing more can start
        self.held_back = bool(counts.blocked_kinds or counts.blocked_queues or counts.blocked_keys)
        got = {row["id"] for row in claimed}
        rows_ = [start for start in starts if start[2] in got]
        if rows_:
            cur.execute(
                self._q["flow_insert_starts"],
                {"rows": self.db.list_param(rows_), "now": self.db.time_param(now)},
            )
        return claimed

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
        limits: Mapping[str, _Limit],
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
        self, cur: Cursor, limits: Mapping[str, _Limit], now: datetime, *, trim: bool
    ) -> _Counts:
        """Running jobs and starts in each window, and which limits are used up."""
        counts = _Counts()
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
            self._rate_counts(cur, lim, now, counts, trim=trim)
            self._block(lim, counts)
        return counts

    def _rate_counts(
        self, cur: Cursor, lim: _Limit, now: datetime, counts: _Counts, *, trim: bool
    ) -> None:
        base, whole = lim.whole.base, lim.whole
        windows = [row.rate_per_key_window for row in (whole, *lim.keys.values())]
        if whole.rate_window is not None:
            windows.append(whole.rate_window)
        longest = max((w for w in windows if w is not None), default=None)
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

    def _block(self, lim: _Limit, counts: _Counts) -> None:
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
            counts = self._counts(cur, limits, now, trim=False)
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
                        "rate": _rate(rate, window),
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
                    rate=_rate(whole.rate_count, whole.rate_window),
                    max_running_per_key=whole.max_running_per_key,
                    rate_per_key=_rate(whole.rate_per_key_count, whole.rate_per_key_window),
                    running=counts.running[base],
                    starts_in_window=counts.starts[base],
                    blocked=blocked_whole,
                    keys=per_key,
                    waiting=mine,
                )
            )
        return found


def _room(limits: Mapping[str, _Limit], counts: _Counts) -> int | None:
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


def _rate(count: int | None, window: timedelta | None) -> dict[str, Any] | None:
    if count is None or window is None:
        return None
    return {"count": count, "window_seconds": window.total_seconds()}


def _ms(window: timedelta | None) -> int | None:
    return None if window is None else int(window / timedelta(milliseconds=1))


def _params(row: LimitRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "scope": row.scope,
        "target": row.target,
        "limit_key": row.limit_key,
        "max_running": row.max_running,
        "rate_count": row.rate_count,
        "rate_window_ms": _ms(row.rate_window),
        "max_running_per_key": row.max_running_per_key,
        "rate_per_key_count": row.rate_per_key_count,
        "rate_per_key_window_ms": _ms(row.rate_per_key_window),
    }


def _row(found: Any) -> LimitRow:
    def window(ms: Any) -> timedelta | None:
        return None if ms is None else timedelta(milliseconds=int(ms))

    return LimitRow(
        scope=found["scope"],
        target=found["target"],
        limit_key=found["limit_key"],
        max_running=found["max_running"],
        rate_count=found["rate_count"],
        rate_window=window(found["rate_window_ms"]),
        max_running_per_key=found["max_running_per_key"],
        rate_per_key_count=found["rate_per_key_count"],
        rate_per_key_window=window(found["rate_per_key_window_ms"]),
    )

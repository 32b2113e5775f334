"""Flow-control limits as stored: the ``mf_flow_limits`` rows, and a kind's or queue's
limits with its key rows folded in.

Internal, used by :mod:`mailfathom.store.flow.repository` (the claim and the usage) and by
:mod:`mailfathom.jobs.admin.limits` (writing a
:class:`~mailfathom.jobs.flow.limits.FlowLimit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

__all__ = [
    "Limit",
    "LimitRow",
    "LimitUsageRow",
    "limit_rows",
    "limit_windows",
    "rate_dict",
    "read_row",
    "row_params",
]


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
    """The rows a :class:`~mailfathom.jobs.flow.limits.FlowLimit` is stored as."""
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
class Limit:
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
        """Whether any per-key limit is set (a job then falls under its key's too)."""
        whole = self.whole
        return bool(self.keys or whole.max_running_per_key or whole.rate_per_key_count)


def limit_windows(lim: Limit) -> list[timedelta]:
    """Every rate window of one kind's or queue's limits (empty: it has no rate)."""
    rows = (lim.whole, *lim.keys.values())
    found = [row.rate_per_key_window for row in rows if row.rate_per_key_window is not None]
    if lim.whole.rate_window is not None:
        found.append(lim.whole.rate_window)
    return found


def rate_dict(count: int | None, window: timedelta | None) -> dict[str, Any] | None:
    """A rate as the usage reports it: ``{"count": n, "window_seconds": s}``, or None."""
    if count is None or window is None:
        return None
    return {"count": count, "window_seconds": window.total_seconds()}


def _ms(window: timedelta | None) -> int | None:
    return None if window is None else int(window / timedelta(milliseconds=1))


def row_params(row: LimitRow) -> dict[str, Any]:
    """``row`` as the parameters of ``flow_upsert_limit`` (windows in milliseconds)."""
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


def read_row(found: Any) -> LimitRow:
    """A ``flow_limits`` result row as a :class:`LimitRow`."""

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

"""Flow-control limits as the console shows them: each limit, its use, its busiest keys and
the jobs it holds back; and which limit holds back one waiting job.

Internal. The figures come from ``mf.limits.usage()`` (one read transaction over the
stored limits, the Claimed jobs and the recent starts). A kind limited per key may have
many keys in use at once (one per customer, one per recipient domain): the views here
keep the keys that matter — blocked first, then the busiest — up to a cap, and say how
many there are in all, so a page stays small however many keys are in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailfathom.errors import NotFound
from mailfathom.jobs.state import JobState
from mailfathom.store.flow.repository import WAITING_SHOWN
from mailfathom.validate import check_limit

if TYPE_CHECKING:
    from mailfathom.app import MailFathom
    from mailfathom.jobs.model import Job

__all__ = [
    "KEYS_MOST",
    "KEYS_SHOWN",
    "WAITING_SHOWN",
    "Holding",
    "LimitsConsole",
    "holding",
    "limit_view",
    "rate_text",
]

#: Keys shown per limit unless a caller asks for another number.
KEYS_SHOWN = 20
#: The most keys a caller may ask for per limit.
KEYS_MOST = 1000

_UNITS = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"))


def rate_text(rate: dict[str, Any] | None) -> str:
    """A rate as it is declared: ``{"count": 100, "window_seconds": 60.0}`` → ``100/min``
    (``5/10s``, ``20/s``, ``3/250ms``); None → ``—``."""
    if rate is None:
        return "—"
    count, seconds = rate["count"], float(rate["window_seconds"])
    for size, unit in _UNITS:
        if seconds >= size and (seconds / size).is_integer():
            times = int(seconds / size)
            return f"{count}/{unit}" if times == 1 else f"{count}/{times}{unit}"
    return f"{count}/{round(seconds * 1000)}ms"


def _busiest(row: dict[str, Any]) -> tuple[bool, int, int, str]:
    return (not row["blocked"], -row["running"], -row["starts_in_window"], row["key"])


def limit_view(usage: dict[str, Any], *, keys: int = KEYS_SHOWN) -> dict[str, Any]:
    """One limit's usage with at most ``keys`` keys — blocked ones first, then by running
    jobs and recent starts — and the counts of all its keys (``keys_total``,
    ``keys_blocked``); ``waiting_more`` is true when more jobs wait than are listed."""
    rows = sorted(usage["keys"], key=_busiest)
    return {
        **{name: value for name, value in usage.items() if name != "keys"},
        "keys": rows[:keys],
        "keys_total": len(rows),
        "keys_blocked": sum(1 for row in rows if row["blocked"]),
        "waiting_more": len(usage["waiting"]) >= WAITING_SHOWN,
    }


@dataclass(frozen=True, slots=True)
class Holding:
    """A limit that holds one due job back: its name, the job's key when it is the key's
    limit that is used up (None: the whole kind or queue), and why in words."""

    limit: str
    key: str | None
    why: str

    def __str__(self) -> str:
        key = "" if self.key is None else f" key {self.key}"
        return f"waiting on {self.limit}{key}: {self.why}"


def _why(values: dict[str, Any], running: int, starts: int) -> str:
    most, rate = values["max_running"], values["rate"]
    if most is not None and running >= most:
        return f"{running} of {most} running"
    if rate is not None and starts >= rate["count"]:
        return f"{starts} of {rate_text(rate)} started"
    return "used up"


def holding(
    usage: list[dict[str, Any]], *, kind: str, queue: str, key: str | None
) -> list[Holding]:
    """The used-up limits among ``usage`` that hold back a due Pending job of ``kind`` in
    ``queue`` with limit key ``key`` (empty: nothing holds it, it waits for a worker)."""
    found = []
    for limit in usage:
        if (kind if limit["scope"] == "kind" else queue) != limit["target"]:
            continue
        if limit["blocked"]:
            whole = {"max_running": limit["max_running"], "rate": limit["rate"]}
            why = _why(whole, limit["running"], limit["starts_in_window"])
            found.append(Holding(limit["name"], None, why))
            continue
        for row in limit["keys"]:
            if key is not None and row["key"] == key and row["blocked"]:
                why = _why(row, row["running"], row["starts_in_window"])
                found.append(Holding(limit["name"], key, why))
    return found


class LimitsConsole:
    """The console's reads of flow-control limits (mixed into the Console; needs
    ``self.mf``)."""

    mf: MailFathom

    def limits(self, *, keys: int = KEYS_SHOWN) -> list[dict[str, Any]]:
        """Every stored limit by name, each with at most ``keys`` keys
        (:func:`limit_view`)."""
        keys = check_limit(keys, name="keys", high=KEYS_MOST)
        return [limit_view(usage, keys=keys) for usage in self.mf.limits.usage()]

    def limit(self, name: str, *, keys: int = KEYS_MOST) -> dict[str, Any]:
        """One limit by its name (``kind:<kind>`` or ``queue:<queue>``), with at most
        ``keys`` keys; :class:`NotFound` when no such limit is stored."""
        keys = check_limit(keys, name="keys", high=KEYS_MOST)
        for usage in self.mf.limits.usage():
            if usage["name"] == name:
                return limit_view(usage, keys=keys)
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise NotFound(
            f"no limit named {shown!r} is stored: limits are named kind:<kind> or "
            "queue:<queue>, and /limits (GET /api/limits) lists them"
        )

    def holding(self, job: Job) -> list[Holding]:
        """The limits holding ``job`` back now: only a due Pending job can be held back
        by a limit (a held, scheduled, running or finished one is not waiting on any)."""
        due = job.available_at is not None and job.available_at <= self.mf.clock.now()
        if job.state is not JobState.PENDING or not due:
            return []
        mine = {("kind", job.kind), ("queue", job.queue)}
        if not any((row.scope, row.target) in mine for row in self.mf.limits.stored()):
            return []  # no limit on its kind or queue: skip counting the others' use
        usage = self.mf.limits.usage()
        return holding(usage, kind=job.kind, queue=job.queue, key=job.limit_key)

"""Which jobs an operator means: a filter parsed from text, shared by the CLI, pages and API.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A :class:`JobQuery` is built from plain strings (command-line options, query
parameters, JSON fields) and validated once, here, so every surface refuses the
same bad input with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from mailfathom.errors import InvalidInput
from mailfathom.jobs.registry import check_name
from mailfathom.jobs.state import JobState
from mailfathom.validate import check_text

__all__ = ["DURATION_LONGEST", "HELD", "JobQuery", "format_duration", "parse_duration"]

#: The pseudo-state for held jobs (Pending with no available instant) in state filters.
HELD = "Held"
_DURATION = re.compile(r"(\d+)([smhdw])")
#: A whole duration: number-unit pairs, each ended by its unit letter (no backtracking).
_DURATIONS = re.compile(r"(?:\d+[smhdw])+")
#: The whole text a duration may take (spaces included), checked before any regex runs.
DURATION_LONGEST = 40
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_FIELDS = ("state", "kind", "queue", "text", "older_than", "newer_than")
_STATE_NAMES = ", ".join([*(s.value for s in JobState), HELD])


def parse_duration(text: str, *, what: str = "age") -> timedelta:
    """``"90s"``, ``"15m"``, ``"2h"``, ``"7d"``, ``"1w"`` or combinations (``"1h30m"``).

    The length is checked before any pattern is applied: a long text (thousands of digits
    from a query string) is refused at once, whatever the pattern would cost on it."""
    if len(text) > DURATION_LONGEST:
        raise InvalidInput(
            f"{what} {text[:20]!r}… is not a duration: it is {len(text)} characters long, "
            f"and a duration takes at most {DURATION_LONGEST} (for example 30m, 2h or 1d12h)"
        )
    cleaned = "".join(text.lower().split())
    if not cleaned or not _DURATIONS.fullmatch(cleaned):
        raise InvalidInput(
            f"{what} {text!r} is not a duration: write a number and a unit s, m, h, d or w, "
            "for example 30m, 2h or 1d12h"
        )
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(cleaned))
    if seconds <= 0 or seconds > 10 * 365 * 86400:
        raise InvalidInput(f"{what} {text!r} must be more than zero and at most ten years")
    return timedelta(seconds=seconds)


def format_duration(span: timedelta) -> str:
    """The shortest text that :func:`parse_duration` reads back as ``span``."""
    seconds = int(span.total_seconds())
    parts = []
    for unit in ("w", "d", "h", "m", "s"):
        count, seconds = divmod(seconds, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


@dataclass(frozen=True, slots=True)
class JobQuery:
    """A filter over jobs: every field optional, None meaning "any".

    ``state`` is a job state or :data:`HELD`. ``older_than`` / ``newer_than`` are
    measured from when each job was enqueued.
    """

    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    text: str | None = None
    older_than: timedelta | None = None
    newer_than: timedelta | None = None

    @classmethod
    def parse(cls, values: Mapping[str, str | None]) -> JobQuery:
        """Build from strings (blank means unset); any bad value raises :class:`InvalidInput`."""
        unknown = sorted(set(values) - set(_FIELDS))
        if unknown:
            raise InvalidInput(
                f"unknown job filters {unknown}: use state, kind, queue, text, older_than, "
                "newer_than"
            )

        def given(name: str) -> str | None:
            value = values.get(name)
            if not isinstance(value, str):
                return None
            return check_text(f"the {name} filter", value).strip() or None

        state = given("state")
        if state is not None:
            state = HELD if state.lower() == HELD.lower() else _state_name(state)
        kind, queue, text = given("kind"), given("queue"), given("text")
        if kind is not None:
            check_name("job kind", kind, longest=200)
        if queue is not None:
            check_name("queue", queue, longest=100)
        if text is not None and len(text) > 200:
            raise InvalidInput("text to search for must be at most 200 characters")
        older, newer = given("older_than"), given("newer_than")
        query = cls(
            state=state,
            kind=kind,
            queue=queue,
            text=text,
            older_than=None if older is None else parse_duration(older, what="older_than"),
            newer_than=None if newer is None else parse_duration(newer, what="newer_than"),
        )
        if (
            query.older_than is not None
            and query.newer_than is not None
            and query.older_than >= query.newer_than
        ):
            raise InvalidInput(
                f"older_than {format_duration(query.older_than)} and newer_than "
                f"{format_duration(query.newer_than)} match nothing: older_than must be the "
                "shorter span"
            )
        return query

    @property
    def empty(self) -> bool:
        """True when the query matches every job."""
        return self == JobQuery()

    def with_state(self, state: str | None) -> JobQuery:
        """This query with ``state`` replaced."""
        return JobQuery(state, self.kind, self.queue, self.text, self.older_than, self.newer_than)

    def params(self) -> dict[str, str]:
        """The set fields as strings, the inverse of :meth:`parse` (for links and forms)."""
        found = {
            "state": self.state,
            "kind": self.kind,
            "queue": self.queue,
            "text": self.text,
            "older_than": None if self.older_than is None else format_duration(self.older_than),
            "newer_than": None if self.newer_than is None else format_duration(self.newer_than),
        }
        return {name: value for name, value in found.items() if value is not None}

    def describe(self) -> str:
        """A short phrase for confirmations: ``DeadLettered jobs of kind x in queue y …``."""
        words = [f"{self.state} jobs" if self.state else "jobs"]
        if self.kind:
            words.append(f"of kind {self.kind}")
        if self.queue:
            words.append(f"in queue {self.queue}")
        if self.text:
            words.append(f"mentioning {self.text!r}")
        if self.older_than:
            words.append(f"enqueued more than {format_duration(self.older_than)} ago")
        if self.newer_than:
            words.append(f"enqueued less than {format_duration(self.newer_than)} ago")
        return " ".join(words)

    def list_arguments(self, now: datetime) -> dict[str, object]:
        """Keyword arguments for ``mf.jobs.list`` at the instant ``now``."""
        return {
            "state": None if self.state in (None, HELD) else self.state,
            "held": self.state == HELD,
            "kind": self.kind,
            "queue": self.queue,
            "text": self.text,
            "created_before": None if self.older_than is None else now - self.older_than,
            "created_after": None if self.newer_than is None else now - self.newer_than,
        }


def _state_name(text: str) -> str:
    wanted = text.lower().replace("_", "")
    for state in JobState:
        if wanted == state.value.lower():
            return state.value
    raise InvalidInput(f"unknown job state {text!r}: use one of {_STATE_NAMES}")

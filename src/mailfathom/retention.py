"""Retention rules: how long terminal jobs, finished emails and audit events keep
everything before the pruner compacts (or, by opt-in, deletes) them.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

An audit event (an operator's move on a job or an email) is kept as long as its row:
past the audit period it is only compacted (its reason cut to one line), and it goes
only with a row that retention deletes.

A rule is a duration (``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"``, or a number of
seconds) or ``"never"`` / None. Compaction keeps a row and its idempotency key forever
and drops only its bulk (payload, tracebacks, message bytes); see docs/retention.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from mailfathom.errors import ConfigurationError

__all__ = [
    "DEFAULT_AUDIT_RETENTION",
    "DEFAULT_EMAIL_RETENTION",
    "DEFAULT_JOB_RETENTION",
    "EMAIL_STAGES",
    "JOB_STATES",
    "RetentionPolicy",
    "parse_duration",
]

#: The terminal job states a rule may name.
JOB_STATES = ("Succeeded", "DeadLettered", "Dropped")
#: The final email stages a rule may name.
EMAIL_STAGES = ("Sent", "Refused", "Cancelled")

#: DeadLettered is never compacted by default: it waits for an operator, and a requeue
#: needs the payload.
DEFAULT_JOB_RETENTION: Mapping[str, str | None] = {
    "Succeeded": "7d",
    "Dropped": "30d",
    "DeadLettered": None,
}
DEFAULT_EMAIL_RETENTION: Mapping[str, str | None] = dict.fromkeys(EMAIL_STAGES, "30d")
DEFAULT_AUDIT_RETENTION = "365d"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: Applied to the stripped text, at most :data:`_LONGEST` characters of it.
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_LONGEST = 64
_NEVER = frozenset({"never", "none", "off", "forever"})


def parse_duration(setting: str, value: Any) -> timedelta | None:
    """``value`` as a retention period (None: never), or a ConfigurationError naming
    ``setting`` and saying what to write instead."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NEVER):
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif (
        isinstance(value, str)
        and len(value) <= _LONGEST
        and (match := _DURATION.fullmatch(value.strip()))
    ):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ConfigurationError(
            f"{setting} = {value!r} is not a retention period: write a duration such as "
            "'7d', '12h', '30m', '90s' or '2w', a number of seconds, or 'never'"
        )
    if not math.isfinite(seconds) or seconds <= 0 or seconds > 100 * 366 * 86400:
        raise ConfigurationError(
            f"{setting} = {value!r} must be a positive period of at most 100 years (or 'never')"
        )
    return timedelta(seconds=seconds)


def _rules(
    setting: str,
    given: Mapping[str, Any] | None,
    defaults: Mapping[str, Any],
    names: tuple[str, ...],
) -> dict[str, timedelta | None]:
    if given is not None and not isinstance(given, Mapping):
        raise ConfigurationError(
            f"{setting} must be a mapping of {', '.join(names)} to periods, not {given!r}"
        )
    merged = {**defaults, **(given or {})}
    unknown = sorted(set(merged) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{setting} names {unknown}: only {', '.join(names)} rows are ever pruned"
        )
    return {name: parse_duration(f"{setting}[{name!r}]", merged.get(name)) for name in names}


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Every retention rule, parsed. Build it with :meth:`from_settings`."""

    #: Terminal job state -> period (None: never pruned).
    jobs: Mapping[str, timedelta | None]
    #: Job kind -> its own periods for the states it names (the others follow ``jobs``).
    kinds: Mapping[str, Mapping[str, timedelta | None]] = field(default_factory=dict)
    #: Final email stage -> period.
    emails: Mapping[str, timedelta | None] = field(default_factory=dict)
    #: How long operators' audit events keep their full reason; afterwards one line of it
    #: (None: always the full reason). An event itself lives as long as its row.
    audit: timedelta | None = None
    #: Delete, instead of compacting, rows past their period that have no idempotency key.
    delete_keyless: bool = False

    @classmethod
    def parse(
        cls,
        *,
        jobs: Mapping[str, Any] | None = None,
        kinds: Mapping[str, Mapping[str, Any]] | None = None,
        emails: Mapping[str, Any] | None = None,
        audit: Any = DEFAULT_AUDIT_RETENTION,
        delete_keyless: bool = False,
        setting_names: tuple[str, str, str, str] = (
            "retention",
            "retention_kinds",
            "email_retention",
            "audit_retention",
        ),
    ) -> RetentionPolicy:
        """Validate raw rules (as settings hold them); errors name the setting at fault."""
        jobs_name, kinds_name, emails_name, audit_name = setting_names
        if kinds is not None and not isinstance(kinds, Mapping):
            raise ConfigurationError(
                f"{kinds_name} must map job kinds to {{state: period}}, not {kinds!r}"
            )
        parsed_kinds: dict[str, dict[str, timedelta | None]] = {}
        for kind, rules in (kinds or {}).items():
            name = f"{kinds_name}[{kind!r}]"
            if not isinstance(kind, str) or not kind:
                raise ConfigurationError(f"{kinds_name} keys must be job kinds, not {kind!r}")
            full = _rules(name, rules, {}, JOB_STATES)
            parsed_kinds[kind] = {state: full[state] for state in rules}
        if not isinstance(delete_keyless, bool):
            raise ConfigurationError(
                f"retention_delete_keyless must be true or false, not {delete_keyless!r}"
            )
        return cls(
            jobs=_rules(jobs_name, jobs, DEFAULT_JOB_RETENTION, JOB_STATES),
            kinds=parsed_kinds,
            emails=_rules(emails_name, emails, DEFAULT_EMAIL_RETENTION, EMAIL_STAGES),
            audit=parse_duration(audit_name, audit),
            delete_keyless=delete_keyless,
        )

    def with_kind(self, kind: str, rules: Mapping[str, Any] | Any) -> RetentionPolicy:
        """This policy plus ``kind``'s own rules (``@mf.job(..., retention=...)``): a
        mapping of states to periods, or one period for every terminal state but
        DeadLettered (which stays as the policy says unless named)."""
        name = f"retention of job kind {kind!r}"
        if not isinstance(rules, Mapping):
            rules = {"Succeeded": rules, "Dropped": rules}
        full = _rules(name, rules, {}, JOB_STATES)
        own = {**self.kinds.get(kind, {}), **{state: full[state] for state in rules}}
        return RetentionPolicy(
            jobs=self.jobs,
            kinds={**self.kinds, kind: own},
            emails=self.emails,
            audit=self.audit,
            delete_keyless=self.delete_keyless,
        )

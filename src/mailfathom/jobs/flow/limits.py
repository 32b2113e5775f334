"""Flow control: the fleet-wide limits on when jobs may start, and their parsing.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A :class:`FlowLimit` caps the jobs of one kind or one queue, across every worker on
every machine: how many may run at once (``max_running``), how many may start in
any window of time (``rate="100/min"``), and the same two per *limit key* (say one
customer's jobs: ``max_running_per_key``, ``rate_per_key``), with optional values
for particular keys (``key_limits={"gmail.com": KeyLimit(rate="20/s")}``).

Limits are rows in ``mf_flow_limits`` (written when a worker starts, or by
``mf.limits.sync()``); the claim reads them and leaves a job Pending while a limit
it falls under is used up, so a job that may not start spends nothing. The rules:

- *running* means Claimed: a SIGKILLed worker's jobs count until their lease is
  reaped (conservative, never over).
- a *start* is a claim, retries included: each attempt counts once, in a sliding
  window (exact: at most N starts in **any** window of that length; a fixed
  window or a token bucket would let 2N through across a boundary).

Internal apart from the names re-exported by :mod:`mailfathom`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from mailfathom.errors import InvalidInput
from mailfathom.validate import check_name

__all__ = [
    "FlowLimit",
    "KeyFunction",
    "KeyLimit",
    "Rate",
    "check_slots",
    "compute_key",
    "free_slots",
    "parse_queues",
    "parse_rate",
    "resolve_slots",
]

Scope = Literal["kind", "queue"]
#: Computes a job's limit key from its payload; returns a str or an int.
KeyFunction = Callable[[Mapping[str, Any]], object]

#: The longest limit key (after ``str()`` of an int).
MAX_KEY_LENGTH = 200
#: The largest count and the longest window a rate may have.
MAX_RATE_COUNT = 1_000_000
MAX_WINDOW = timedelta(days=1)
MAX_RUNNING = 100_000

_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "sec": timedelta(seconds=1),
    "second": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "minute": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "hour": timedelta(hours=1),
    "d": timedelta(days=1),
    "day": timedelta(days=1),
}
#: Applied to the stripped text; no two quantifiers can take the same characters.
_RATE = re.compile(r"(\d+)\s*/\s*(?:(\d+)\s*)?([a-z]+)")
#: The longest rate text read (checked before the pattern runs).
_RATE_LONGEST = 64
_RATE_HELP = (
    'write a rate as "<starts>/<window>", e.g. "100/min", "20/s", "5/10s" or "1000/h" '
    "(units: ms, s, min, h, d)"
)


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts in any window of ``window``."""

    count: int
    window: timedelta

    def __str__(self) -> str:
        millis = int(self.window / timedelta(milliseconds=1))
        return f"{self.count}/{millis}ms"


def parse_rate(value: object, *, name: str = "rate") -> Rate | None:
    """``value`` ("100/min", a :class:`Rate`, or None) as a :class:`Rate`; a clear error
    naming ``name`` otherwise."""
    if value is None or isinstance(value, Rate):
        rate = value
    elif isinstance(value, str):
        match = None if len(value) > _RATE_LONGEST else _RATE.fullmatch(value.strip().lower())
        unit = None if match is None else _unit(match.group(3))
        if match is None or unit is None:
            raise InvalidInput(f"{name} {value!r} is not a rate: {_RATE_HELP}")
        times = int(match.group(2)) if match.group(2) else 1
        rate = Rate(int(match.group(1)), unit * times)
    else:
        raise InvalidInput(f"{name} must be a string such as '100/min', not {value!r}")
    if rate is None:
        return None
    if not 1 <= rate.count <= MAX_RATE_COUNT:
        raise InvalidInput(
            f"{name} {value!r} allows {rate.count} starts: give 1 to {MAX_RATE_COUNT} per "
            "window (to stop a queue altogether, pause it)"
        )
    if not timedelta(milliseconds=1) <= rate.window <= MAX_WINDOW:
        raise InvalidInput(f"{name} {value!r}: the window must be from 1 ms to 1 day")
    return rate


def _unit(word: str) -> timedelta | None:
    """The window unit ``word`` names ("s", "min", "minutes" ...), or None."""
    found = _UNITS.get(word)
    if found is None and len(word) > 1 and word.endswith("s"):
        found = _UNITS.get(word[:-1])
    return found


def _check_running(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNNING:
        raise InvalidInput(
            f"{name} must be an integer from 1 to {MAX_RUNNING}, not {value!r} (to stop the "
            "work altogether, pause its queue)"
        )
    return value


@dataclass(frozen=True, slots=True)
class KeyLimit:
    """The limits of one particular key, in place of the per-key defaults."""

    max_running: int | None = None
    rate: Rate | None = None

    @classmethod
    def build(cls, key: str, value: object) -> KeyLimit:
        """From a :class:`KeyLimit` or a mapping ``{"max_running": 2, "rate": "20/s"}``."""
        if isinstance(value, KeyLimit):
            value = {"max_running": value.max_running, "rate": value.rate}
        if not isinstance(value, Mapping) or set(value) - {"max_running", "rate"}:
            raise InvalidInput(
                f"key_limits[{key!r}] must be a mapping with max_running and/or rate, not {value!r}"
            )
        built = cls(
            max_running=_check_running(
                value.get("max_running"), f"key_limits[{key!r}]['max_running']"
            ),
            rate=parse_rate(value.get("rate"), name=f"key_limits[{key!r}]['rate']"),
        )
        if built.max_running is None and built.rate is None:
            raise InvalidInput(f"key_limits[{key!r}] sets nothing: give max_running or rate")
        return built


@dataclass(frozen=True, slots=True)
class FlowLimit:
    """The limits on one kind or one queue, fleet-wide; build with :meth:`build`."""

    scope: Scope
    target: str
    max_running: int | None = None
    rate: Rate | None = None
    max_running_per_key: int | None = None
    rate_per_key: Rate | None = None
    key_limits: Mapping[str, KeyLimit] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The limit's id: ``kind:<kind>`` or ``queue:<queue>``."""
        return f"{self.scope}:{self.target}"

    @property
    def per_key(self) -> bool:
        """Whether any per-key limit is set (jobs then need a limit key to fall under it)."""
        return bool(self.max_running_per_key or self.rate_per_key or self.key_limits)

    @classmethod
    def build(
        cls,
        scope: Scope,
        target: str,
        *,
        max_running: object = None,
        rate: object = None,
        max_running_per_key: object = None,
        rate_per_key: object = None,
        key_limits: Mapping[str, object] | None = None,
    ) -> FlowLimit | None:
        """Validate every value (a clear error naming the fix); None when nothing is set."""
        keys: dict[str, KeyLimit] = {}
        if key_limits is not None:
            if not isinstance(key_limits, Mapping):
                raise InvalidInput(
                    "key_limits must map a limit key to {'max_running': n, 'rate': '20/s'}"
                )
            for key, value in key_limits.items():
                keys[check_key_value(key, what="a key_limits key")] = KeyLimit.build(key, value)
        limit = cls(
            scope=scope,
            target=target,
            max_running=_check_running(max_running, "max_running"),
            rate=parse_rate(rate),
            max_running_per_key=_check_running(max_running_per_key, "max_running_per_key"),
            rate_per_key=parse_rate(rate_per_key, name="rate_per_key"),
            key_limits=keys,
        )
        if limit.max_running is None and limit.rate is None and not limit.per_key:
            return None
        return limit


def check_key_value(value: object, *, what: str = "the limit key") -> str:
    """A limit key as stored: a str of 1-200 characters, or an int (stored as text)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(f"{what} must be a str or an int, not {type(value).__name__} {value!r}")
    text = str(value)
    if not 1 <= len(text) <= MAX_KEY_LENGTH or "\x00" in text:
        raise InvalidInput(
            f"{what} {text[:50]!r} must be 1-{MAX_KEY_LENGTH} characters with no NUL"
        )
    return text


def compute_key(kind: str, function: KeyFunction, payload: Mapping[str, Any], index: int) -> str:
    """The limit key of one job, from the kind's ``limit_key`` function; a clear error
    (nothing enqueued) when the function raises or returns something unusable."""
    try:
        value = function(payload)
    except Exception as exc:
        raise InvalidInput(
            f"the limit_key function of job kind {kind!r} raised {type(exc).__name__}: {exc} "
            f"(payload #{index}): fix the payload or the function; nothing was enqueued"
        ) from exc
    try:
        return check_key_value(value, what=f"the limit_key of job kind {kind!r}")
    except InvalidInput as exc:
        raise InvalidInput(f"{exc} (payload #{index}); nothing was enqueued") from None


def check_slots(queues: Mapping[Any, Any]) -> dict[str, int]:
    """Per-queue slots (``{"mail": 5, "default": 20}``), validated."""
    if not queues:
        raise InvalidInput("queues must name at least one queue")
    slots: dict[str, int] = {}
    for name, count in queues.items():
        queue = check_name("queue", name, longest=100)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10_000:
            raise InvalidInput(
                f"queue {queue!r} has {count!r} slots: give each queue a whole number of slots "
                "from 1 to 10000 (leave a queue out to take nothing from it)"
            )
        slots[queue] = count
    return slots


def resolve_slots(
    concurrency: int | None, queues: Sequence[str] | Mapping[str, int] | None
) -> tuple[int, Sequence[str] | None, dict[str, int] | None]:
    """A worker's ``(concurrency, queues, slots)``: with per-queue slots, ``concurrency``
    is their sum (a different value given is refused); otherwise it defaults to 10."""
    if not isinstance(queues, Mapping):
        return (10 if concurrency is None else concurrency), queues, None
    slots = check_slots(queues)
    total = sum(slots.values())
    if concurrency is not None and concurrency != total:
        raise InvalidInput(
            f"concurrency={concurrency!r} differs from the {total} slots of queues={slots!r}: "
            "leave concurrency out with per-queue slots"
        )
    return total, list(slots), slots


def free_slots(slots: Mapping[str, int], taken: Sequence[str]) -> dict[str, int]:
    """The slots of each queue not taken (``taken`` lists one queue per job held)."""
    used = Counter(taken)
    return {queue: n - used[queue] for queue, n in slots.items() if n > used[queue]}


def parse_queues(text: str) -> list[str] | dict[str, int]:
    """The CLI's ``--queues``: ``"mail,default"`` (names) or ``"mail=5,default=20"``
    (per-queue slots); a clear error for anything else."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise InvalidInput("give at least one queue name (or name=slots)")
    with_slots = [part for part in parts if "=" in part]
    if not with_slots:
        return parts
    if len(with_slots) != len(parts):
        raise InvalidInput(
            f"{text!r} mixes queues with and without slots: give every queue its slots "
            "(mail=5,default=20) or none (mail,default)"
        )
    slots: dict[str, object] = {}
    for part in parts:
        name, _, count = part.partition("=")
        name, count = name.strip(), count.strip()
        if name in slots:
            raise InvalidInput(f"queue {name!r} is given twice in {text!r}: give it once")
        slots[name] = int(count) if count.isdigit() else count
    return check_slots(slots)

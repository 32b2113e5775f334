"""The project's speed targets, checked against one run's medians."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.report import Row

__all__ = ["RSS_NOISE_PERCENT", "TARGETS", "Target", "Verdict", "check_targets", "render_targets"]

RSS_NOISE_PERCENT = 5.0
"""RSS growth from the checkpoint to the end below this counts as flat."""

_PG = ("mailfathom-pg",)
_PG_ALL = ("mailfathom-pg", "mailfathom-pg-4")
_LITE = ("mailfathom-sqlite",)
_LITE_ALL = ("mailfathom-sqlite", "mailfathom-sqlite-4")
_PG_CEILING = ("ceiling-pg", "ceiling-pg-4")
_PGQUEUER = ("pgqueuer-asyncpg", "pgqueuer-psycopg")
_LITE_CEILING = ("ceiling-sqlite",)
_DJANGO_LITE = ("mailfathom-django-sqlite",)
_DJANGO_PG = ("mailfathom-django-pg",)
_DJANGO_PEERS_LITE = ("django-mailer-sqlite", "post-office-sqlite", "post-office-p2-sqlite")
_DJANGO_PEERS_PG = ("django-mailer-pg", "post-office-pg", "post-office-p2-pg")


@dataclass(frozen=True)
class Target:
    """The best of ``ours`` against the best of ``reference`` (a ratio), or a bound."""

    text: str
    metric: str
    ours: tuple[str, ...]
    reference: tuple[str, ...] = ()
    at_least: float | None = None
    """For a ratio: ours / reference must reach this."""
    at_most: float | None = None
    """For an absolute figure: ours must not exceed this."""


TARGETS = (
    Target("PostgreSQL processing >= 2x PgQueuer+asyncpg", "process", _PG_ALL,
           ("pgqueuer-asyncpg",), at_least=2.0),
    Target("PostgreSQL processing >= 50 % of the plain-SQL ceiling", "process", _PG_ALL,
           _PG_CEILING, at_least=0.5),
    Target("SQLite processing >= 10x huey", "process", _LITE_ALL, ("huey",), at_least=10.0),
    Target("SQLite processing >= 25 % of the plain-SQL ceiling (synchronous=FULL)", "process",
           _LITE_ALL, _LITE_CEILING, at_least=0.25),
    Target("PostgreSQL enqueue one per transaction >= 80 % of the ceiling", "enqueue_single",
           _PG, _PG_CEILING, at_least=0.8),
    Target("SQLite enqueue one per transaction >= 80 % of the ceiling", "enqueue_single",
           _LITE, _LITE_CEILING, at_least=0.8),
    Target("PostgreSQL p50 enqueue->start <= 10 ms with an idle worker (ms)", "latency_p50",
           _PG, at_most=10.0),
    Target("PostgreSQL p99 enqueue->start <= 5 ms with an idle worker (ms)", "latency_p99",
           _PG, at_most=5.0),
    Target("PostgreSQL enqueue one per transaction >= PgQueuer's", "enqueue_single", _PG,
           _PGQUEUER, at_least=1.0),
    Target("PostgreSQL enqueue in batches >= PgQueuer's", "enqueue_batch", _PG, _PGQUEUER,
           at_least=1.0),
    Target("email pipeline on SQLite >= 40 % of the plain smtplib loop", "email", _LITE,
           ("smtplib-loop",), at_least=0.4),
    Target("email pipeline on PostgreSQL >= 40 % of the plain smtplib loop", "email", _PG,
           ("smtplib-loop",), at_least=0.4),
    Target("email through Django on SQLite, end to end >= 2x the best durable Django email peer",
           "email", _DJANGO_LITE, _DJANGO_PEERS_LITE, at_least=2.0),
    Target("email through Django on PostgreSQL, end to end >= 2x the best durable Django email "
           "peer", "email", _DJANGO_PG, _DJANGO_PEERS_PG, at_least=2.0),
    Target("email pipeline on SQLite, end to end >= 2x the best durable Django email peer",
           "email", _LITE, _DJANGO_PEERS_LITE, at_least=2.0),
    Target("email pipeline on PostgreSQL, end to end >= 2x the best durable Django email peer",
           "email", _PG, _DJANGO_PEERS_PG, at_least=2.0),
    Target("Django send_mail on SQLite, one per call >= django-mailer's", "email_record_single",
           _DJANGO_LITE, ("django-mailer-sqlite",), at_least=1.0),
    Target("Django send_mail on PostgreSQL, one per call >= django-mailer's",
           "email_record_single", _DJANGO_PG, ("django-mailer-pg",), at_least=1.0),
    Target(f"SQLite worker RSS flat: growth < {RSS_NOISE_PERCENT:g} % (%)", "rss_growth", _LITE,
           at_most=RSS_NOISE_PERCENT),
    Target(f"PostgreSQL worker RSS flat: growth < {RSS_NOISE_PERCENT:g} % (%)", "rss_growth",
           _PG, at_most=RSS_NOISE_PERCENT),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """One target: what it asks, what was measured, met or not (None: not measured)."""

    target: str
    measured: str
    met: bool | None


def _best(rows: dict[tuple[str, str], Row], metric: str, keys: Sequence[str]) -> Row | None:
    found = [rows[(metric, key)] for key in keys if (metric, key) in rows]
    if not found:
        return None
    if found[0].metric.higher_is_better:
        return max(found, key=lambda row: row.median)
    return min(found, key=lambda row: row.median)


def check_targets(rows: Sequence[Row]) -> list[Verdict]:
    """Every target, in its order."""
    by_key = {(row.metric.key, row.system.key): row for row in rows}
    verdicts = []
    for target in TARGETS:
        mine = _best(by_key, target.metric, target.ours)
        theirs = _best(by_key, target.metric, target.reference) if target.reference else None
        if mine is None or (target.reference and theirs is None):
            verdicts.append(Verdict(target.text, "not measured in this run", None))
        elif theirs is not None and target.at_least is not None:
            ratio = mine.median / theirs.median
            measured = (
                f"{mine.system.key} {mine.median:,.0f} vs {theirs.system.key} "
                f"{theirs.median:,.0f} = {ratio:.2f}x"
            )
            verdicts.append(Verdict(target.text, measured, ratio >= target.at_least))
        else:
            assert target.at_most is not None
            measured = f"{mine.system.key} {mine.median:.2f}"
            verdicts.append(Verdict(target.text, measured, mine.median <= target.at_most))
    return verdicts


def render_targets(verdicts: Sequence[Verdict]) -> str:
    """The targets as a Markdown table."""
    marks = {True: "met", False: "**not met**", None: "not measured"}
    lines = ["| target | measured (medians) | verdict |", "|---|---|---|"]
    lines += [f"| {v.target} | {v.measured} | {marks[v.met]} |" for v in verdicts]
    return "\n".join(lines)

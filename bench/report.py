"""Medians, ranges and ratios, as one Markdown table (readable in a terminal too)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.sizes import Sizes
from bench.systems import System
from bench.workloads import Sample

__all__ = ["METRICS", "Metric", "Row", "render", "summarise"]


@dataclass(frozen=True)
class Metric:
    """A measured quantity: how to name it, its unit, which way is better."""

    key: str
    title: str
    unit: str
    higher_is_better: bool
    compared: bool = True
    """Whether rows get ratios (memory readings do; derived growth does not)."""


METRICS = (
    Metric("enqueue_single", "enqueue, one job per transaction", "jobs/s", True),
    Metric("enqueue_batch", "enqueue in batches of {enqueue_batch}", "jobs/s", True),
    Metric(
        "process", "processing {jobs} jobs: worker start → last completion durable", "jobs/s", True
    ),
    Metric("latency_p50", "enqueue→start p50, {latency_rate:g} jobs/s, idle worker", "ms", False),
    Metric("latency_p99", "enqueue→start p99, {latency_rate:g} jobs/s, idle worker", "ms", False),
    Metric("rss_checkpoint", "worker RSS after {rss_checkpoint} jobs", "MiB", False),
    Metric("rss_end", "worker RSS after {rss_jobs} jobs", "MiB", False),
    Metric("rss_growth", "RSS growth from {rss_checkpoint} to {rss_jobs} jobs", "%", False, False),
    Metric("rss_peak", "worker peak RSS (VmHWM) over {rss_jobs} jobs", "MiB", False),
    Metric(
        "email", "email, 4 KB messages, end to end: record, then deliver to Sent", "msg/s", True
    ),
    Metric(
        "email_record",
        "email: record in batches of 100 (record_many: frozen bytes + delivery jobs; "
        "through Django: send_mass_mail)",
        "msg/s",
        True,
    ),
    Metric(
        "email_record_single",
        "email: record one per call (record, or Django's send_mail: its own transaction)",
        "msg/s",
        True,
    ),
    Metric("email_deliver", "email: deliver, worker start → last Sent durable", "msg/s", True),
)


@dataclass(frozen=True)
class Row:
    """One system's figures for one metric, with its ratios."""

    metric: Metric
    system: System
    median: float
    low: float
    high: float
    rounds: int
    vs_peer: float | None
    vs_ceiling: float | None
    jobs: int | None = None
    """Set when the figure was reached short of the workload's size (a time budget ran out)."""


def _better(metric: Metric, a: float, b: float) -> bool:
    return a > b if metric.higher_is_better else a < b


def _ratio(metric: Metric, value: float, reference: float | None) -> float | None:
    """How many times better than the reference (> 1 = better), or None."""
    if reference is None or reference <= 0 or value <= 0:
        return None
    return value / reference if metric.higher_is_better else reference / value


def _best(
    metric: Metric,
    medians: dict[str, float],
    by_key: dict[str, System],
    role: str,
    database: str,
) -> float | None:
    """The best median among systems of ``role`` on ``database``."""
    chosen: float | None = None
    for key, median in medians.items():
        system = by_key[key]
        if system.role != role or system.database != database:
            continue
        if chosen is None or _better(metric, median, chosen):
            chosen = median
    return chosen


def _derive(samples: Sequence[Sample]) -> list[Sample]:
    """Adds the RSS growth (end vs checkpoint, in %) for each system and round."""
    readings: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for sample in samples:
        if sample.metric in ("rss_checkpoint", "rss_end"):
            readings[(sample.system, sample.round)][sample.metric] = sample.value
    derived = list(samples)
    for (system, round_), found in readings.items():
        if len(found) == 2 and found["rss_checkpoint"] > 0:
            growth = (found["rss_end"] / found["rss_checkpoint"] - 1.0) * 100.0
            derived.append(Sample(system, "rss_growth", round_, growth))
    return derived


def summarise(samples: Sequence[Sample], systems: Iterable[System]) -> list[Row]:
    """Median, range and ratios for every (metric, system) that has samples.

    "Best peer" is the best peer median on the same database; "ceiling" the best
    ceiling median on the same database (for email: the plain smtplib loop).
    """
    by_key = {system.key: system for system in systems}
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    short: dict[tuple[str, str], int] = {}
    for sample in _derive(samples):
        values[(sample.metric, sample.system)].append(sample.value)
        if "jobs" in sample.extra:
            key = (sample.metric, sample.system)
            short[key] = min(short.get(key, sample.extra["jobs"]), sample.extra["jobs"])
    rows: list[Row] = []
    for metric in METRICS:
        medians = {
            key: statistics.median(found)
            for (name, key), found in values.items()
            if name == metric.key and key in by_key
        }

        for system in by_key.values():
            if system.key not in medians:
                continue
            found = values[(metric.key, system.key)]
            median = medians[system.key]
            ceiling = _best(metric, medians, by_key, "ceiling", system.database) or _best(
                metric, medians, by_key, "ceiling", "none"
            )
            peer = _best(metric, medians, by_key, "peer", system.database)
            rows.append(
                Row(
                    metric,
                    system,
                    median,
                    min(found),
                    max(found),
                    len(found),
                    _ratio(metric, median, peer) if metric.compared else None,
                    _ratio(metric, median, ceiling) if metric.compared else None,
                    short.get((metric.key, system.key)),
                )
            )
    return rows


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def render(rows: Sequence[Row], sizes: Sizes) -> str:
    """The Markdown table: one section per metric."""
    lines = [
        "| workload | system | median | range (min-max) | rounds | x best peer | x ceiling |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    current = None
    for row in rows:
        if row.metric is not current:
            current = row.metric
            title = row.metric.title.format(**vars(sizes))
            better = "higher" if row.metric.higher_is_better else "lower"
            lines.append(f"| **{title}** ({row.metric.unit}, {better} is better) | | | | | | |")
        label = row.system.label
        if row.jobs is not None:
            label += f" (stopped by the time budget at {row.jobs:,} jobs)"
        lines.append(
            f"| | {label} | {_number(row.median)} | "
            f"{_number(row.low)}-{_number(row.high)} | {row.rounds} | "
            f"{_times(row.vs_peer)} | {_times(row.vs_ceiling)} |"
        )
    lines.append("")
    lines.append(
        "Ratios: how many times better than the reference (> 1 = better, for every metric). "
        "Best peer and ceiling are taken on the same database; the email ceiling is a plain "
        "smtplib loop into the same sink."
    )
    return "\n".join(lines)

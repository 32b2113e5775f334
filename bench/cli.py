"""``python -m bench``: every system, every workload, one after another, several rounds.

Rounds are the outer loop (round 1 of every system, then round 2, ...), so slow
drift on a shared machine spreads over all systems instead of landing on one.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

from bench import email_rows as email
from bench.charts import bars_from_rows, write_charts
from bench.databases import postgres_problem
from bench.environment import (
    PEERS,
    describe_machine,
    ensure_django_peers_venv,
    ensure_peers_venv,
)
from bench.profiles import summarise_profile
from bench.report import render, summarise
from bench.sizes import DEFAULT, FULL, TINY, Sizes
from bench.systems import WORKLOADS, System, select
from bench.targets import check_targets, render_targets
from bench.workloads import Bench, Sample

__all__ = ["main"]

ALL_WORKLOADS = (*WORKLOADS, "email", "email_django")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="mailfathom side by side with PgQueuer, procrastinate and huey, with "
        "django-mailer and django-post_office for email through Django (email_django), and "
        "with plain-SQL and smtplib ceilings, on this machine.",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--full",
        action="store_true",
        help="20,000 jobs, 200,000 for memory, 10,000 messages, 5 rounds (about an hour)",
    )
    size.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds: how many times each timed workload runs (rows show median and range)",
    )
    parser.add_argument(
        "--process-budget", type=float, help="seconds a processing run may take (then stopped)"
    )
    parser.add_argument(
        "--rss-budget", type=float, help="seconds a memory run may take (then stopped)"
    )
    parser.add_argument("--systems", help="comma-separated keys (default: all)")
    parser.add_argument(
        "--workloads", help=f"comma-separated, from {', '.join(ALL_WORKLOADS)} (default: all)"
    )
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="mailfathom and the ceilings only: no job or Django email peers (no installs)",
    )
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="admin URL; a database per system is created and dropped on its server",
    )
    parser.add_argument("--db-prefix", default="bench_", help="prefix of those database names")
    parser.add_argument("--data-dir", type=Path, default=PEERS / "data", help="SQLite files")
    parser.add_argument("--out", type=Path, help="write every sample and the table as JSON")
    parser.add_argument("--markdown", type=Path, help="write the tables as Markdown")
    parser.add_argument(
        "--charts",
        type=Path,
        metavar="DIR",
        help="draw SVG charts of the ratios (processing, enqueue, latency, email) into DIR",
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy every mailfathom processing worker into this folder"
    )
    return parser


def _sizes(args: argparse.Namespace) -> Sizes:
    preset = FULL if args.full else TINY if args.tiny else DEFAULT
    sizes = preset.with_rounds(args.rounds)
    if args.process_budget is not None:
        sizes = replace(sizes, process_budget_s=args.process_budget)
    if args.rss_budget is not None:
        sizes = replace(sizes, rss_budget_s=args.rss_budget)
    return sizes


def _workloads(text: str | None) -> list[str]:
    if not text:
        return list(ALL_WORKLOADS)
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in ALL_WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; choose from {ALL_WORKLOADS}")
    return chosen


class _Log:
    """Every sample and failure so far; written to ``partial`` after each measurement."""

    def __init__(self, partial: Path | None) -> None:
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._partial = partial

    def measure(self, what: str, run: Callable[[], list[Sample]]) -> None:
        began = time.monotonic()
        try:
            found = run()
        except Exception as exc:
            self.errors.append(f"{what}: {exc}")
            print(f"  {what}: FAILED: {exc}", flush=True)
            return
        self.samples.extend(found)
        shown = ", ".join(f"{s.metric} {s.value:,.2f}" for s in found)
        print(f"  {what}: {shown}  [{time.monotonic() - began:.1f} s]", flush=True)
        if self._partial is not None:
            samples = [asdict(sample) for sample in self.samples]
            self._partial.write_text(json.dumps({"samples": samples, "errors": self.errors}))


def _job_rounds(bench: Bench, systems: Sequence[System], workloads: list[str], log: _Log) -> None:
    for round_ in range(1, bench.sizes.rounds + 1):
        print(f"round {round_} of {bench.sizes.rounds}", flush=True)
        for system in systems:
            has = system.workloads.intersection(workloads)
            name = f"{system.key} r{round_}"
            if "enqueue_single" in has:
                log.measure(f"{name} enqueue_single", partial(bench.enqueue_single, system, round_))
            if has & {"enqueue_batch", "process"}:
                run = partial(
                    bench.batch_and_process,
                    system,
                    round_,
                    timed_batch="enqueue_batch" in has,
                    processing="process" in has,
                )
                log.measure(f"{name} batch+process", run)
            if "latency" in has:
                log.measure(f"{name} latency", partial(bench.latency, system, round_))
    for round_ in range(1, bench.sizes.rss_rounds + 1):
        for system in systems:
            if "rss" in system.workloads and "rss" in workloads:
                log.measure(f"{system.key} memory", partial(bench.memory, system, round_))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns 0, or 1 when any measurement failed."""
    args = _parser().parse_args(argv)
    sizes = _sizes(args)
    workloads = _workloads(args.workloads)
    systems = select(args.systems, peers=not args.no_peers)
    systems += email.systems(systems, workloads)
    problem = postgres_problem(args.pg_url)
    if problem is not None:
        print(f"skipping every PostgreSQL system: {problem}", flush=True)
        systems = [system for system in systems if system.database != "postgresql"]
    peers_python = ""
    if any(system.venv == "peers" for system in systems) or args.profile:
        peers_python = ensure_peers_venv()
    django_python = ""
    if any(system.venv == "django" for system in systems):
        django_python = ensure_django_peers_venv()
    machine = describe_machine(args.pg_url if problem is None else None)
    print("machine: " + "; ".join(f"{k} {v}" for k, v in machine.items()), flush=True)
    print(f"sizes: {sizes}", flush=True)
    bench = Bench(
        sizes=sizes,
        admin_url=args.pg_url,
        data_dir=args.data_dir,
        peers_python=peers_python,
        profile_dir=args.profile,
        db_prefix=args.db_prefix,
        django_python=django_python,
    )
    log = _Log(args.out.with_suffix(".partial.json") if args.out else None)
    began = time.monotonic()
    _job_rounds(bench, [s for s in systems if s.database != "none"], workloads, log)
    if {"email", "email_django"}.intersection(workloads):
        email.run_rounds(bench, systems, workloads, log.measure)
    rows = summarise(log.samples, systems)
    table, verdicts = render(rows, sizes), check_targets(rows)
    text = f"{table}\n\n{render_targets(verdicts)}\n"
    print("\n" + text, flush=True)
    minutes = (time.monotonic() - began) / 60
    print(f"{len(log.samples)} samples in {minutes:.1f} min; {len(log.errors)} failed", flush=True)
    for error in log.errors:
        print(f"FAILED: {error}", flush=True)
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            print(summarise_profile(path), flush=True)
    if args.markdown:
        args.markdown.write_text(text)
    if args.charts:
        for path in write_charts(bars_from_rows(rows, sizes), args.charts):
            print(f"chart: {path}", flush=True)
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "machine": machine,
                    "sizes": asdict(sizes),
                    "systems": [system.key for system in systems],
                    "samples": [asdict(sample) for sample in log.samples],
                    "errors": log.errors,
                    "targets": [asdict(verdict) for verdict in verdicts],
                    "table": table,
                },
                indent=1,
            )
        )
    return 1 if log.errors else 0

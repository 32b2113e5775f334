"""The benchmark charts: drawn from a run's rows or from a recorded table, and the ones
committed under docs/charts/ show the figures docs/benchmarks.md records."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.charts import CHARTS, bars_from_rows, bars_from_table, write_charts
from bench.report import Row, render, summarise
from bench.sizes import TINY
from bench.systems import select
from bench.workloads import Sample

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "docs" / "benchmarks.md"


def _rows() -> list[Row]:
    systems = select("mailfathom-sqlite,pgqueuer-asyncpg,ceiling-pg,ceiling-sqlite", peers=True)
    samples = [
        Sample(system, metric, round_, value * round_)
        for round_ in (1, 2, 3)
        for system, metric, value in [
            ("mailfathom-sqlite", "process", 7000.0),
            ("ceiling-sqlite", "process", 60000.0),
            ("mailfathom-sqlite", "latency_p99", 9.0),
            ("pgqueuer-asyncpg", "latency_p99", 9.5),
            ("pgqueuer-asyncpg", "process", 7500.0),
            ("ceiling-pg", "process", 21000.0),
        ]
    ]
    return summarise(samples, systems)


def test_a_rendered_table_reads_back_as_the_rows_it_came_from() -> None:
    rows = _rows()
    from_rows = bars_from_rows(rows, TINY)
    from_table = bars_from_table(render(rows, TINY))
    assert [(b.metric, b.label) for b in from_table] == [(b.metric, b.label) for b in from_rows]
    for read, made in zip(from_table, from_rows, strict=True):
        for got, want in ((read.vs_peer, made.vs_peer), (read.vs_ceiling, made.vs_ceiling)):
            assert (got is None) == (want is None)
            if got is not None and want is not None:
                assert got == pytest.approx(want, abs=0.005)


def test_a_table_whose_titles_changed_is_refused() -> None:
    table = render(_rows(), TINY).replace("processing", "handling")
    with pytest.raises(ValueError, match="no metric has the title"):
        bars_from_table(table)


def test_charts_are_drawn_for_the_metrics_that_have_ratios(tmp_path: Path) -> None:
    written = write_charts(bars_from_rows(_rows(), TINY), tmp_path)
    assert [path.name for path in written] == ["processing.svg", "latency.svg"]
    processing = written[0].read_text(encoding="utf-8")
    assert "mailfathom · SQLite" in processing and "x best peer" in processing


def test_the_committed_charts_show_the_recorded_figures() -> None:
    """Regenerate with: python -m bench.charts docs/benchmarks.md docs/charts"""
    bars = bars_from_table(RECORDED.read_text(encoding="utf-8"))
    assert bars, "docs/benchmarks.md holds no results table"
    for stem, (_, metrics) in CHARTS.items():
        svg = (ROOT / "docs" / "charts" / f"{stem}.svg").read_text(encoding="utf-8")
        shown = [bar for bar in bars if bar.metric in metrics]
        assert shown, stem
        for bar in shown:
            assert bar.label in svg, (stem, bar.label)
            for ratio in (bar.vs_peer, bar.vs_ceiling):
                if ratio is not None:
                    assert f"{ratio:.2f}x" in svg, (stem, bar.label, ratio)

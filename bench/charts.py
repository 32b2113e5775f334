"""SVG charts of a run: each figure as a ratio to the best peer and to the ceiling.

People would rather look at a ratio than read a table of forty rows. Four charts —
processing, enqueue, latency, email — each with one panel per metric and reference
(x best peer, x ceiling), a bar per system on a log scale around 1 (> 1 = better,
whichever way the metric is better, as in the table).

``python -m bench --charts DIR`` draws them at the end of a run;
``python -m bench.charts TABLE.md DIR`` draws them again from a recorded table (the
``--markdown`` output, or docs/benchmarks.md, whose charts live in docs/charts/).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.report import METRICS, Row
from bench.sizes import Sizes

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["CHARTS", "Bar", "bars_from_rows", "bars_from_table", "main", "write_charts"]

CHARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "processing": ("Processing throughput", ("process",)),
    "enqueue": ("Enqueue throughput", ("enqueue_single", "enqueue_batch")),
    "latency": ("Enqueue → start latency", ("latency_p50", "latency_p99")),
    "email": ("Email, end to end", ("email",)),
}
"""File stem → (title, the metrics it shows)."""

_REFERENCES = (("vs_peer", "x best peer"), ("vs_ceiling", "x ceiling"))


@dataclass(frozen=True)
class Bar:
    """One system's ratios for one metric, as the table shows them."""

    metric: str
    """The metric's key (``process``, ``latency_p99``, ...)."""
    title: str
    label: str
    vs_peer: float | None
    vs_ceiling: float | None


def bars_from_rows(rows: Sequence[Row], sizes: Sizes) -> list[Bar]:
    """The bars of a run just summarised (``bench.report.summarise``)."""
    return [
        Bar(
            row.metric.key,
            row.metric.title.format(**vars(sizes)),
            row.system.label,
            row.vs_peer,
            row.vs_ceiling,
        )
        for row in rows
    ]


def _title_pattern(title: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]*\}", title)
    return re.compile("^" + r"[0-9.,]+".join(re.escape(part) for part in parts) + "$")


def _ratio(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell in ("—", "-", "") else float(cell.rstrip("x").replace(",", ""))


def bars_from_table(markdown: str) -> list[Bar]:
    """The bars of a recorded table (``bench.report.render``'s Markdown), in its order.

    A section whose title no metric matches is refused: the charts must not silently
    lose a figure because the table's wording changed.
    """
    patterns = [(metric.key, _title_pattern(metric.title)) for metric in METRICS]
    bars: list[Bar] = []
    current: tuple[str, str] | None = None
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 7:
            continue
        section = re.match(r"^\*\*(?P<title>.+)\*\* \(", cells[0])
        if section:
            title = section["title"]
            key = next((key for key, pattern in patterns if pattern.match(title)), None)
            if key is None:
                raise ValueError(f"no metric has the title {title!r}: update bench.charts")
            current = (key, title)
        elif cells[0] == "" and current is not None and cells[1]:
            label = re.sub(r" \(stopped by the time budget.*\)$", "", cells[1])
            bars.append(Bar(current[0], current[1], label, _ratio(cells[5]), _ratio(cells[6])))
    return bars


def _panels(bars: Sequence[Bar], metrics: Sequence[str]) -> list[tuple[str, str, list[Bar]]]:
    """(title, reference attribute, bars with a value) for every panel that has one."""
    panels = []
    for key in metrics:
        found = [bar for bar in bars if bar.metric == key]
        for attribute, name in _REFERENCES:
            shown = [bar for bar in found if getattr(bar, attribute) is not None]
            if shown:
                panels.append((f"{found[0].title}: {name}", attribute, shown))
    return panels


def _minor_label(value: float, _: object) -> str:
    """Label the 2 and 5 of each decade, so a panel within one decade still has a scale."""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}x" if round(mantissa) in (2, 5) else ""


def _panel(ax: Axes, title: str, labels: list[str], values: list[float]) -> None:
    """Bars from 1 to each ratio, on a log scale: right of the line is better."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    colours = ["#3f51b5" if label.startswith("mailfathom") else "#9e9e9e" for label in labels]
    positions = list(range(len(values)))
    ax.barh(positions, [value - 1.0 for value in values], left=1.0, color=colours)
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    low, high = min(*values, 1.0) / 1.5, max(*values, 1.0) * 2.5
    if math.log10(high / low) <= 1.7:  # wider panels have enough labels in their decades
        ax.xaxis.set_minor_formatter(FuncFormatter(_minor_label))
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="#212121", linewidth=0.8)
    ax.annotate(  # from the figure's left edge: the titles are longer than the axes
        title,
        xy=(0.0, 1.0),
        xycoords=("figure fraction", "axes fraction"),
        xytext=(6, 5),
        textcoords="offset points",
        fontsize=9,
        fontweight="bold",
    )
    for position, value in zip(positions, values, strict=True):
        ax.annotate(
            f"{value:.2f}x",
            (max(value, 1.0), position),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlim(low, high)


def write_charts(bars: Sequence[Bar], folder: Path) -> list[Path]:
    """One SVG per chart that has figures, into ``folder``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "mailfathom", "font.size": 9})
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for stem, (title, metrics) in CHARTS.items():
        panels = _panels(bars, metrics)
        if not panels:
            continue
        heights = [len(shown) * 0.3 + 0.9 for _, _, shown in panels]
        figure, axes = plt.subplots(
            len(panels),
            1,
            figsize=(8.0, sum(heights) + 0.5),
            squeeze=False,
            gridspec_kw={"height_ratios": heights},
        )
        for ax, (panel_title, attribute, shown) in zip(axes.flat, panels, strict=True):
            _panel(
                ax,
                panel_title,
                [bar.label for bar in shown],
                [float(getattr(bar, attribute)) for bar in shown],
            )
        figure.suptitle(f"{title} (> 1 = better)", x=0.01, ha="left", fontsize=11)
        figure.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.3 / (sum(heights) + 0.5)))
        path = folder / f"{stem}.svg"
        figure.savefig(path, format="svg", metadata={"Date": None})
        plt.close(figure)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.charts TABLE.md DIR``: the charts of a recorded table."""
    parser = argparse.ArgumentParser(prog="python -m bench.charts", description=__doc__)
    parser.add_argument("table", type=Path, help="a Markdown file holding the results table")
    parser.add_argument("folder", type=Path, help="where the SVG files go")
    args = parser.parse_args(argv)
    bars = bars_from_table(args.table.read_text(encoding="utf-8"))
    if not bars:
        raise SystemExit(f"{args.table} holds no results table")
    for path in write_charts(bars, args.folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The overview's throughput chart, laid out on the server as SVG shapes (no JavaScript).

Internal. :func:`throughput_chart` turns per-minute counts into bars of stacked
segments; the template draws them as ``<rect>`` elements with a ``<title>``
tooltip each.
"""

from __future__ import annotations

from dataclasses import dataclass

from mailfathom.jobs.admin.admin import Throughput

__all__ = ["Bar", "Chart", "Segment", "throughput_chart"]

#: (attribute of Throughput, CSS class, label), stacked bottom to top: every attempt that
#: ended in the minute, so a bar's height is the work done. Dead-lettering and drops are
#: events on jobs already counted (a dead letter's last attempt is a failed attempt), so
#: they are named in the tooltip rather than stacked a second time.
SERIES = (
    ("succeeded", "ok", "succeeded"),
    ("failed_attempts", "retry", "failed attempts"),
)
_EVENTS = (("dead_lettered", "dead-lettered"), ("dropped", "dropped"))


@dataclass(frozen=True, slots=True)
class Segment:
    """One coloured part of a bar."""

    y: float
    height: float
    css_class: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One minute: its stacked segments and a tooltip."""

    x: float
    width: float
    segments: list[Segment]
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything the template needs to draw the chart."""

    width: int
    height: int
    plot_height: int
    bars: list[Bar]
    peak: int
    first_label: str
    last_label: str
    total: int
    #: Jobs that succeeded and that were dead-lettered over the whole span.
    succeeded: int
    dead_lettered: int


def throughput_chart(minutes: list[Throughput], *, width: int = 720, height: int = 150) -> Chart:
    """Stacked bars, one per minute, scaled to the busiest minute."""
    plot_height = height - 20
    peak = max((sum(getattr(m, name) for name, _, _ in SERIES) for m in minutes), default=0)
    scale = (plot_height - 16) / peak if peak else 0.0  # headroom for the peak label
    slot = width / max(len(minutes), 1)
    bars = []
    for index, minute in enumerate(minutes):
        y = float(plot_height)
        segments = []
        for name, css_class, _ in SERIES:
            value = getattr(minute, name)
            if value:
                h = max(value * scale, 1.0)
                y -= h
                segments.append(Segment(round(y, 2), round(h, 2), css_class))
        named = [(n, label) for n, _, label in SERIES] + list(_EVENTS)
        parts = [f"{getattr(minute, n)} {label}" for n, label in named if getattr(minute, n)]
        title = f"{minute.minute:%H:%M} UTC: " + (", ".join(parts) or "nothing finished")
        bars.append(Bar(round(index * slot + 1, 2), round(max(slot - 2, 1), 2), segments, title))
    total = sum(minute.succeeded + minute.failed_attempts for minute in minutes)
    return Chart(
        width=width,
        height=height,
        plot_height=plot_height,
        bars=bars,
        peak=peak,
        first_label=f"{minutes[0].minute:%H:%M}" if minutes else "",
        last_label=f"{minutes[-1].minute:%H:%M}" if minutes else "",
        total=total,
        succeeded=sum(minute.succeeded for minute in minutes),
        dead_lettered=sum(minute.dead_lettered for minute in minutes),
    )

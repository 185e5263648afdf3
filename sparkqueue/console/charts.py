"""The depth chart of a queue's page: pygal draws it as SVG, served as an image of its own (an
<img> runs no script, and the page's Content-Security-Policy stays strict).

The time axis's ticks are chosen here, not by pygal: its own fall at fractions of a second over a
short span, and all read the same at any one format. Here they fall on round steps (seconds to
days) that fit the span, written at the precision the span needs, and no two read the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pygal
from pygal.style import Style

STYLE = Style(
    background="white",
    plot_background="white",
    foreground="#1d2733",
    foreground_strong="#1d2733",
    foreground_subtle="#dde3ea",
    colors=("#0b6bcb", "#e8a33d", "#8a94a3"),
    font_family="system-ui, sans-serif",
    label_font_size=11,
    major_label_font_size=11,
    legend_font_size=12,
    no_data_font_size=16,
)
SERIES = (("visible", "visible"), ("in_flight", "in flight"), ("delayed", "delayed"))
MAX_TICKS = 8  # labels on the time axis at most: rotated, they stay apart at the chart's width
STEPS = (  # round steps between ticks, the smallest that keeps them to MAX_TICKS is taken
    *(timedelta(seconds=s) for s in (1, 2, 5, 10, 15, 30)),
    *(timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30)),
    *(timedelta(hours=h) for h in (1, 2, 3, 6, 12, 24, 48, 168)),
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def label_format(span: timedelta) -> str:
    """Seconds within an hour, minutes within a day, the date beyond (all UTC)."""
    if span < timedelta(hours=1):
        return "%H:%M:%S"
    if span < timedelta(days=1):
        return "%H:%M"
    return "%b %d %H:%M"


def time_axis(times: list[datetime]) -> list[tuple[datetime, str]]:
    """Ticks for readings at `times` (oldest first): each a moment and its label, at most
    MAX_TICKS, on multiples of the smallest round step that keeps them to that; a tick whose
    label reads as one before it is dropped. Where fewer than two steps fall within the span,
    the first and the last readings are labelled too (readings within one second: one label)."""
    if not times:
        return []
    moments = [_utc(t) for t in times]
    first, last = moments[0], moments[-1]
    form = label_format(last - first)
    step = next((s for s in STEPS if (last - first) / s < MAX_TICKS), STEPS[-1])
    steps_to_first = -((EPOCH - first) // step)  # rounded up: the first tick is not before it
    at, ticks = EPOCH + steps_to_first * step, []
    while at <= last:
        ticks.append(at)
        at += step
    if len(ticks) < 2:
        ticks = sorted({first, *ticks, last})
    axis: list[tuple[datetime, str]] = []
    for tick in ticks:
        text = tick.strftime(form)
        if text not in (shown for _, shown in axis):
            axis.append((tick, text))
    return axis


def depth_svg(points: list[dict[str, Any]]) -> bytes:
    """Visible, in-flight and delayed messages at each redrive pass (its metrics rows)."""
    axis = time_axis([p["pass_at"] for p in points])
    chart = pygal.DateTimeLine(
        width=1000,
        height=280,
        style=STYLE,
        js=[],  # no script from a CDN: the page's own needs none
        disable_xml_declaration=False,
        show_dots=len(points) < 60,
        x_label_rotation=20,
        x_labels=[{"value": at, "label": text} for at, text in axis] or None,
        x_value_formatter=lambda at: at.strftime("%Y-%m-%d %H:%M:%S UTC"),  # a dot's own time
        x_title="UTC" if points else None,
        legend_at_bottom=True,
        no_data_text="no redrive pass yet",
    )
    for column, label in SERIES:
        chart.add(label, [(_utc(p["pass_at"]), p[column]) for p in points])
    return chart.render()


def _utc(at: datetime) -> datetime:
    """A reading's time in UTC (one without a zone is UTC already, as the tables store it)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)

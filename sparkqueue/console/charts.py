"""The depth chart of a queue's page: pygal draws it as SVG, served as an image of its own (an
<img> runs no script, and the page's Content-Security-Policy stays strict)."""

from __future__ import annotations

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


def depth_svg(points: list[dict[str, Any]]) -> bytes:
    """Visible, in-flight and delayed messages at each redrive pass (its metrics rows)."""
    chart = pygal.DateTimeLine(
        width=1000,
        height=280,
        style=STYLE,
        js=[],  # no script from a CDN: the page's own needs none
        disable_xml_declaration=False,
        show_dots=len(points) < 60,
        x_label_rotation=20,
        x_value_formatter=lambda at: at.strftime("%H:%M:%S"),
        legend_at_bottom=True,
        no_data_text="no redrive pass yet",
    )
    for column, label in SERIES:
        chart.add(label, [(p["pass_at"], p[column]) for p in points])
    return chart.render()

"""The depth chart's time axis (console/charts.py): labels that differ, at the precision the
chart's span needs, over a few seconds and over days; and the same labels in the drawn SVG."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from sparkqueue.console.charts import MAX_TICKS, depth_svg, time_axis

START = datetime(2025, 3, 4, 23, 59, 58, 500_000, tzinfo=UTC)  # across midnight, off the second


def readings(span: timedelta, count: int = 30) -> list[datetime]:
    return [START + span * i / (count - 1) for i in range(count)]


@pytest.mark.parametrize(
    ("span", "pattern"),
    [
        (timedelta(seconds=1.2), r"\d\d:\d\d:\d\d"),  # one step within: the first reading too
        (timedelta(seconds=4), r"\d\d:\d\d:\d\d"),
        (timedelta(seconds=40), r"\d\d:\d\d:\d\d"),
        (timedelta(minutes=50), r"\d\d:\d\d:\d\d"),
        (timedelta(hours=3), r"\d\d:\d\d"),
        (timedelta(hours=23, minutes=59), r"\d\d:\d\d"),
        (timedelta(days=1), r"[A-Z][a-z]{2} \d\d \d\d:\d\d"),
        (timedelta(days=6), r"[A-Z][a-z]{2} \d\d \d\d:\d\d"),
    ],
)
def test_labels_differ_and_fit_the_span(span, pattern):
    times = readings(span)
    axis = time_axis(times)
    labels = [text for _, text in axis]
    assert 2 <= len(labels) <= MAX_TICKS, labels
    assert len(set(labels)) == len(labels), labels
    assert all(re.fullmatch(pattern, text) for text in labels), labels
    assert all(times[0] <= at <= times[-1] for at, _ in axis)


def test_readings_within_a_second_get_one_label():
    axis = time_axis(readings(timedelta(milliseconds=300), count=5))
    assert [text for _, text in axis] == ["23:59:58"]
    assert time_axis([]) == []


def test_the_drawn_chart_carries_the_same_distinct_labels():
    """Over a short span and over a long one: pygal's own ticks all read the same there."""
    for span in (timedelta(seconds=2), timedelta(days=2)):
        points = [
            {"pass_at": at.replace(tzinfo=None), "visible": i, "in_flight": 0, "delayed": 0}
            for i, at in enumerate(readings(span))
        ]  # a naive time, as a table may hand it back, is UTC
        svg = depth_svg(points).decode()
        axis = re.search(r'<g class="axis x.*?</g>\s*</g>', svg, re.S)[0]
        drawn = re.findall(r"<text[^>]*>([^<]+)</text>", axis)
        assert drawn == [text for _, text in time_axis([p["pass_at"] for p in points])]
        assert len(drawn) >= 2 and len(set(drawn)) == len(drawn), drawn

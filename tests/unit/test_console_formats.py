"""The console's filters (console/formats.py) on their own: what a person reads for each kind of
value, and that a template printing a value without one never shows a Python repr."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from jinja2 import Environment

from sparkqueue.console import formats


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0"), (7, "7"), (1234, "1,234"), (1_234_567, "1,234,567"), (12.0, "12"), (None, "—")],
)
def test_counts_have_thousands_separators(value, shown):
    assert formats.count(value) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (0.45, "0.5 s"),
        (9.94, "9.9 s"),
        (9.96, "10 s"),
        (30, "30 s"),
        (59.6, "1 min"),
        (90, "1 min 30 s"),
        (3600, "1 h"),
        (3661, "1 h 1 min"),  # two units at most
        (5400, "1 h 30 min"),
        (86400, "1 day"),
        (90000, "1 day 1 h"),
        (345_600, "4 days"),
        (1_209_600, "14 days"),
        (-90, "-1 min 30 s"),
        (None, "—"),
    ],
)
def test_durations_in_the_largest_units(seconds, shown):
    assert formats.duration(seconds) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 B"),
        (200, "200 B"),
        (1023, "1,023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (262_144, "256 KiB"),
        (1_048_576, "1 MiB"),
        (3 * 2**30, "3 GiB"),
        (None, "—"),
    ],
)
def test_sizes_in_binary_units(value, shown):
    assert formats.size(value) == shown


def test_every_moment_reads_the_same_way_in_utc():
    aware = datetime(2025, 1, 31, 14, 5, 9, 987_000, tzinfo=UTC)
    elsewhere = aware.astimezone(timezone(timedelta(hours=-5)))
    naive = aware.replace(tzinfo=None)  # as a table stores it: UTC
    for value in (aware, elsewhere, naive, aware.timestamp()):
        assert formats.when(value) == "2025-01-31 14:05:09 UTC"
    assert formats.when(None) == "—"


def test_flags_and_unknowns():
    assert [formats.yes_no(v) for v in (True, False, None)] == ["yes", "no", "—"]


@pytest.mark.parametrize(
    ("value", "name", "shown"),
    [
        (True, "summarised", "yes"),
        (None, "to", "—"),
        (90.0, "moved_by_seconds", "1 min 30 s"),
        (30, "visibility_timeout", "30 s"),
        (262_144, "max_message_bytes", "256 KiB"),
        (1234, "max_receive_count", "1,234"),
        (1234.56, "ratio", "1,234.6"),
        (datetime(2025, 1, 31, 14, 5, 9, tzinfo=UTC), "visible_until", "2025-01-31 14:05:09 UTC"),
        ("orders-dlq", "to", "orders-dlq"),
    ],
)
def test_any_value_by_its_type_and_name(value, name, shown):
    assert formats.human(value, name) == shown


def test_templates_get_the_filters_and_print_no_python_repr():
    environment = Environment(autoescape=True, finalize=formats.finalize)
    formats.install(environment)
    page = environment.from_string(
        "{{ flag }}|{{ nothing }}|{{ n | count }}|{{ s | duration }}|{{ b | size }}|{{ at | when }}"
    )
    shown = page.render(flag=False, nothing=None, n=1234, s=345_600, b=1536, at=0)
    assert shown == "no||1,234|4 days|1.5 KiB|1970-01-01 00:00:00 UTC"


def test_a_count_or_duration_that_is_not_a_number_reads_as_unknown():
    from sparkqueue.console import formats

    for value in (float("nan"), float("inf")):
        assert formats.count(value) == formats.UNKNOWN
        assert formats.duration(value) == formats.UNKNOWN

"""How the console writes values for people: counts with thousands separators, durations and
byte sizes in units one reads at a glance, every timestamp in one form (UTC, to the second), and
yes/no for flags. Each is a Jinja2 filter (`install` registers them once, in app.py), so every
template says the same thing the same way, and the pages hand the templates plain values.

`finalize` is the environment's last word on any `{{ value }}` a template prints without a
filter: no page ever shows Python's True, False or None."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment

UNKNOWN = "—"  # a value the page cannot know (a queue it could not read, an unset attribute)
WHEN = "%Y-%m-%d %H:%M:%S UTC"
UNITS = (("day", 86400), ("h", 3600), ("min", 60), ("s", 1))
SIZES = ("B", "KiB", "MiB", "GiB")
# Attribute and detail names that hold seconds without saying so in their name.
DURATION_NAMES = frozenset({"visibility_timeout"})


def count(value: int | float | None) -> str:
    """1234 -> "1,234": a count of messages, receives or queues."""
    if value is None or not math.isfinite(value):
        return UNKNOWN
    return f"{round(value):,}"


def yes_no(value: bool | None) -> str:
    return UNKNOWN if value is None else "yes" if value else "no"


def duration(seconds: float | None) -> str:
    """30 -> "30 s", 345600 -> "4 days", 5400 -> "1 h 30 min": at most the two largest units,
    the rest rounded away (the exact seconds are the attribute's own field); under ten seconds
    to a tenth, since a message's age is often that."""
    if seconds is None or not math.isfinite(seconds):
        return UNKNOWN
    sign, left = ("-" if seconds < 0 else ""), abs(seconds)
    if round(left, 1) < 10:
        return f"{sign}{left:.1f}".removesuffix(".0") + " s"
    left = round(left)
    parts = []
    for name, size in UNITS:
        amount, left = divmod(left, size)
        if amount or parts:
            parts.append((amount, name))
    shown = [f"{n} {name}s" if name == "day" and n != 1 else f"{n} {name}" for n, name in parts[:2]]
    if len(shown) == 2 and parts[1][0] == 0:  # "4 days", not "4 days 0 h"
        shown = shown[:1]
    return sign + " ".join(shown)


def size(value: int | None) -> str:
    """262144 -> "256 KiB", 1536 -> "1.5 KiB", 200 -> "200 B": binary units, as SQS's limits."""
    if value is None:
        return UNKNOWN
    amount, unit = float(value), 0
    while abs(amount) >= 1024 and unit < len(SIZES) - 1:
        amount, unit = amount / 1024, unit + 1
    if unit == 0:
        return f"{value:,} B"
    return f"{amount:,.1f}".removesuffix(".0") + f" {SIZES[unit]}"


def when(value: datetime | float | None) -> str:
    """A moment as "2025-01-31 14:05:09 UTC": a datetime (one without a zone is UTC, as the
    tables store it) or epoch seconds (a queue's created_at)."""
    if value is None:
        return UNKNOWN
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(value, UTC)
    return moment.strftime(WHEN)


def human(value: Any, name: str = "") -> str:
    """Any value as the filters above would show it, chosen by its type and, for a number, by
    its name (`..._seconds` a duration, `..._bytes` a size): for a message's history, whose
    details differ from step to step."""
    if value is None or isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, int | float):
        if name.endswith("_seconds") or name in DURATION_NAMES:
            return duration(value)
        if name.endswith("_bytes"):
            return size(round(value))
        return count(value) if isinstance(value, int) else f"{value:,.1f}"
    return str(value)


def finalize(value: Any) -> Any:
    """What a template prints for a value it did not format: "" for None, yes/no for a flag,
    anything else as it is (then escaped)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return yes_no(value)
    return value


FILTERS: dict[str, Callable[..., str]] = {
    "count": count,
    "yes_no": yes_no,
    "duration": duration,
    "size": size,
    "when": when,
    "human": human,
}


def install(environment: Environment) -> None:
    """The filters, under the names the templates use (the environment is made with
    `finalize=finalize`: it is read when a template is compiled)."""
    environment.filters.update(FILTERS)

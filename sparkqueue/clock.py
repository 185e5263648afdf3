"""One notion of "now" per operation, read on the driver, so a fake clock can drive every decision."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    """The default clock: the driver's wall time in UTC."""
    return datetime.now(UTC)


def read_clock(clock: Clock) -> datetime:
    """Returns the clock's instant, refusing naive datetimes that would be silently misread."""
    now = clock()
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("the broker's clock must return an aware datetime (UTC)")
    return now.astimezone(UTC)


def to_micros(instant: datetime) -> int:
    """Microseconds since the epoch: the exact, time-zone-free form Spark timestamps round-trip."""
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int | None) -> datetime | None:
    """Inverse of `to_micros`; None stays None (a message never received has no first receive)."""
    if micros is None:
        return None
    seconds, rest = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest)

"""Argument checks shared by every public method: whole numbers, seconds, queue names."""

from __future__ import annotations

import re
from typing import Any

from ..errors import EmptyBatchRequest, InvalidParameterValue
from ..limits import FIFO_SUFFIX, QUEUE_NAME_MAX_LENGTH

NAME_PATTERN = re.compile(rf"[A-Za-z0-9_-]{{1,{QUEUE_NAME_MAX_LENGTH}}}")


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """Accepts a whole number within [low, high]; bools and floats are rejected, not coerced."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterValue(
            f"{name} must be a whole number from {low} to {high}, got {value!r}"
        )
    if not low <= value <= high:
        raise InvalidParameterValue(f"{name} must be from {low} to {high}, got {value}")
    return value


def check_seconds(name: str, value: Any, *, allow_zero: bool) -> float:
    """A duration in seconds (int or float): zero or more, or strictly more than zero."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = "zero or more" if allow_zero else "more than zero"
        raise InvalidParameterValue(f"{name} must be a number of seconds, {bound}; got {value!r}")
    return float(value)


def check_queue_name(name: Any, *, fifo: bool | None = None) -> str:
    """Validates a queue name; with `fifo` given, also that the `.fifo` suffix matches the type."""
    if not isinstance(name, str):
        raise InvalidParameterValue(f"a queue name must be a str, got {type(name).__name__}")
    base = name[: -len(FIFO_SUFFIX)] if name.endswith(FIFO_SUFFIX) else name
    if not NAME_PATTERN.fullmatch(base):
        raise InvalidParameterValue(
            f"invalid queue name {name!r}: use 1 to {QUEUE_NAME_MAX_LENGTH} characters of A-Z,"
            f" a-z, 0-9, '_' and '-' (plus the '{FIFO_SUFFIX}' suffix for FIFO queues)"
        )
    if fifo is not None and fifo != name.endswith(FIFO_SUFFIX):
        if fifo:
            raise InvalidParameterValue(f"a FIFO queue name must end in '{FIFO_SUFFIX}': {name!r}")
        raise InvalidParameterValue(
            f"only FIFO queues may end in '{FIFO_SUFFIX}'; pass fifo=True for {name!r}"
        )
    return name


def check_list(what: str, value: Any, item: str) -> list[Any]:
    """A batch argument: a list or tuple (a lone str would otherwise iterate by character)."""
    if not isinstance(value, (list, tuple)):
        raise InvalidParameterValue(f"{what} takes a list of {item}, got {type(value).__name__}")
    return list(value)


def check_receipt_handles(what: str, value: Any) -> list[str]:
    """A non-empty list of receipt handles (their form is checked against the queue later)."""
    handles = check_list(what, value, "receipt handles")
    if not handles:
        raise EmptyBatchRequest(f"{what} needs at least one receipt handle")
    for index, handle in enumerate(handles):
        if not isinstance(handle, str):
            raise InvalidParameterValue(f"entry {index}: a receipt handle must be a str")
    return handles

"""Argument checks shared by every public method: whole numbers, seconds, queue names."""

from __future__ import annotations

import re
from typing import Any

from ..errors import EmptyBatchRequest, InvalidParameterValue, invalid_value
from ..limits import (
    FIFO_SUFFIX,
    MAX_VISIBILITY_SECONDS,
    QUEUE_NAME_MAX_LENGTH,
)

MESSAGE_ID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
NAME_PATTERN = re.compile(rf"[A-Za-z0-9_-]{{1,{QUEUE_NAME_MAX_LENGTH}}}")


def check_int(name: str, value: Any, low: int, high: int, *, sqs_name: str = "") -> int:
    """Accepts a whole number within [low, high]; bools and floats are rejected, not coerced.
    `sqs_name`: the parameter's name in SQS's API, for SQS's words on the wire."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterValue(
            f"{name} must be a whole number from {low} to {high}, got {value!r}"
        )
    if not low <= value <= high:
        reason = f"{sqs_name} must be >= {low} and <= {high}"
        words = sqs_name and invalid_value(value, sqs_name, reason)
        raise InvalidParameterValue(
            f"{name} must be from {low} to {high}, got {value}", sqs_message=words or None
        )
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
            f" a-z, 0-9, '_' and '-' (plus the '{FIFO_SUFFIX}' suffix for FIFO queues)",
            sqs_message="Can only include alphanumeric characters, hyphens, or underscores. 1 to"
            f" {QUEUE_NAME_MAX_LENGTH} in length",
        )
    if fifo is not None and fifo != name.endswith(FIFO_SUFFIX):
        if fifo:
            raise InvalidParameterValue(f"a FIFO queue name must end in '{FIFO_SUFFIX}': {name!r}")
        raise InvalidParameterValue(
            f"only FIFO queues may end in '{FIFO_SUFFIX}'; pass fifo=True for {name!r}"
        )
    return name


def check_message_id(value: Any) -> str:
    """A message id as the API hands them out: a UUID in its 36-character form (ours are
    UUIDv7-shaped, rules/ids.py), lower-case hex."""
    if not isinstance(value, str) or not MESSAGE_ID_PATTERN.fullmatch(value):
        shown = value[:60] if isinstance(value, str) else value
        raise InvalidParameterValue(
            f"a message id is a UUID such as 01a2b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b, got {shown!r}"
        )
    return value


def check_message_ids(values: Any) -> list[str]:
    return [check_message_id(value) for value in check_list("message_ids", values, "message id")]


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


def check_sink(sink: object) -> str:
    """A sink is a Delta table path (quoted with backticks, so it may hold none) or, for a broker
    in catalog mode, a table name `schema.table` or `catalog.schema.table`."""
    if not isinstance(sink, str) or not sink.strip() or "`" in sink:
        raise InvalidParameterValue(
            "sink must be a Delta table path or URI without backticks (or, in catalog mode, a"
            f" table name `schema.table` or `catalog.schema.table`); got {sink!r}"
        )
    return sink


def check_fraction(name: str, value: object) -> float:
    """A number from 0 up to (not including) 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise InvalidParameterValue(
            f"{name} must be a number from 0 up to (not including) 1, got {value!r}"
        )
    return float(value)


def check_visibility_entries(
    what: str, entries: object
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """A visibility batch's (handle, seconds) pairs: those in range, and the error code of each
    handle whose seconds are not; a malformed, empty or repeating batch fails whole."""
    pairs = check_list(what, entries, "(handle, seconds) pairs")
    if not pairs:
        raise EmptyBatchRequest(f"{what} needs at least one entry")
    failed: dict[str, str] = {}
    valid: list[tuple[str, int]] = []
    for index, entry in enumerate(pairs):
        if not (isinstance(entry, tuple | list) and len(entry) == 2 and isinstance(entry[0], str)):
            raise InvalidParameterValue(f"entry {index}: expected a (receipt_handle, seconds) pair")
        handle, seconds = entry
        try:
            valid.append(
                (handle, check_int("visibility_timeout", seconds, 0, MAX_VISIBILITY_SECONDS))
            )
        except InvalidParameterValue as error:
            failed[handle] = error.code
    if len({handle for handle, _ in valid}) < len(valid):
        raise InvalidParameterValue(f"{what}: a receipt handle appears twice")
    return valid, failed

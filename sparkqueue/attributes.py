"""Queue names and attributes: SQS's defaults and ranges, validated before anything is written."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParameterValue

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,80}")
FIFO_SUFFIX = ".fifo"
MAX_VISIBILITY_SECONDS = 43_200
MAX_SHARDS = 64

_RANGES: dict[str, tuple[int, int]] = {
    "visibility_timeout": (0, MAX_VISIBILITY_SECONDS),
    "delay_seconds": (0, 900),
    "retention_seconds": (60, 1_209_600),
    "max_message_bytes": (1024, 262_144),
    "max_receive_count": (1, 1000),
    "shards": (1, MAX_SHARDS),
}


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """Accepts a whole number within [low, high]; bools and floats are rejected, not coerced."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterValue(
            f"{name} must be a whole number from {low} to {high}, got {value!r}"
        )
    if not low <= value <= high:
        raise InvalidParameterValue(f"{name} must be from {low} to {high}, got {value}")
    return value


def check_queue_name(name: Any, *, fifo: bool | None = None) -> str:
    """Validates a queue name; with `fifo` given, also that the `.fifo` suffix matches the type."""
    if not isinstance(name, str):
        raise InvalidParameterValue(f"a queue name must be a str, got {type(name).__name__}")
    base = name[: -len(FIFO_SUFFIX)] if name.endswith(FIFO_SUFFIX) else name
    if not NAME_PATTERN.fullmatch(base):
        raise InvalidParameterValue(
            f"invalid queue name {name!r}: use 1 to 80 characters of A-Z, a-z, 0-9, '_' and '-'"
            f" (plus the '{FIFO_SUFFIX}' suffix for FIFO queues)"
        )
    if fifo is not None and fifo != name.endswith(FIFO_SUFFIX):
        if fifo:
            raise InvalidParameterValue(f"a FIFO queue name must end in '{FIFO_SUFFIX}': {name!r}")
        raise InvalidParameterValue(
            f"only FIFO queues may end in '{FIFO_SUFFIX}'; pass fifo=True for {name!r}"
        )
    return name


@dataclass(frozen=True)
class QueueAttributes:
    """A queue's settings; stored with the queue so every Broker on the root sees the same ones."""

    visibility_timeout: int = 30
    delay_seconds: int = 0
    retention_seconds: int = 345_600
    max_message_bytes: int = 262_144
    dead_letter_queue: str | None = None
    max_receive_count: int | None = None
    fifo: bool = False
    content_based_deduplication: bool = False
    shards: int = 8

    def __post_init__(self) -> None:
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if value is not None or name != "max_receive_count":
                check_int(name, value, low, high)
        for flag in ("fifo", "content_based_deduplication"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameterValue(f"{flag} must be True or False")
        if (self.dead_letter_queue is None) != (self.max_receive_count is None):
            raise InvalidParameterValue(
                "dead_letter_queue and max_receive_count go together: give both or neither"
            )
        if self.dead_letter_queue is not None:
            check_queue_name(self.dead_letter_queue)
        if self.content_based_deduplication and not self.fifo:
            raise InvalidParameterValue("content_based_deduplication applies to FIFO queues only")

    @property
    def has_dead_letter_queue(self) -> bool:
        return self.dead_letter_queue is not None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> QueueAttributes:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in json.loads(text).items() if k in known})

    def changed(self, changes: dict[str, Any]) -> QueueAttributes:
        """A copy with `changes` applied; unknown names and immutable ones are rejected."""
        known = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InvalidParameterValue(
                f"unknown queue attribute(s) {unknown}; allowed: {sorted(known - IMMUTABLE)}"
            )
        fixed = sorted(
            name for name in IMMUTABLE & set(changes) if changes[name] != getattr(self, name)
        )
        if fixed:
            raise InvalidParameterValue(f"{fixed} cannot change after the queue is created")
        return dataclasses.replace(self, **changes)


IMMUTABLE = frozenset({"fifo", "shards"})

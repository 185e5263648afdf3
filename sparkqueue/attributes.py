"""A queue's attributes: SQS's defaults and ranges, validated before anything is written."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParameterValue
from .limits import (
    DEFAULT_RETENTION_SECONDS,
    DEFAULT_SHARDS,
    DEFAULT_VISIBILITY_SECONDS,
    MAX_DELAY_SECONDS,
    MAX_MESSAGE_BYTES,
    MAX_RECEIVE_COUNT,
    MAX_RETENTION_SECONDS,
    MAX_SHARDS,
    MAX_VISIBILITY_SECONDS,
    MIN_MESSAGE_BYTES,
    MIN_RETENTION_SECONDS,
)
from .rules.checks import check_int, check_queue_name

RANGES: dict[str, tuple[int, int]] = {
    "visibility_timeout": (0, MAX_VISIBILITY_SECONDS),
    "delay_seconds": (0, MAX_DELAY_SECONDS),
    "retention_seconds": (MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS),
    "max_message_bytes": (MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES),
    "max_receive_count": (1, MAX_RECEIVE_COUNT),
    "shards": (1, MAX_SHARDS),
}
IMMUTABLE = frozenset({"fifo", "shards"})


@dataclass(frozen=True)
class QueueAttributes:
    """A queue's settings; stored with the queue so every Broker on the root sees the same ones."""

    visibility_timeout: int = DEFAULT_VISIBILITY_SECONDS
    delay_seconds: int = 0
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    max_message_bytes: int = MAX_MESSAGE_BYTES
    dead_letter_queue: str | None = None
    max_receive_count: int | None = None
    fifo: bool = False
    content_based_deduplication: bool = False
    shards: int = DEFAULT_SHARDS

    def __post_init__(self) -> None:
        for name, (low, high) in RANGES.items():
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

    def difference(self, wanted: QueueAttributes) -> str:
        """What differs from `wanted`, for QueueAlreadyExists messages."""
        have, want = self.as_dict(), wanted.as_dict()
        return ", ".join(f"{k}={have[k]!r} (asked {want[k]!r})" for k in have if have[k] != want[k])

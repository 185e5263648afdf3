"""A queue's attributes: SQS's defaults and ranges, validated before anything is written."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidParameterValue
from .limits import (
    DEFAULT_MESSAGE_BYTES,
    DEFAULT_RETENTION_SECONDS,
    DEFAULT_SHARDS,
    DEFAULT_VISIBILITY_SECONDS,
    MAX_DELAY_SECONDS,
    MAX_MESSAGE_BYTES,
    MAX_RECEIVE_COUNT,
    MAX_RETENTION_SECONDS,
    MAX_SHARDS,
    MAX_VISIBILITY_SECONDS,
    MAX_WAIT_SECONDS,
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
    "receive_wait_time_seconds": (0, MAX_WAIT_SECONDS),
}
IMMUTABLE = frozenset({"fifo", "shards", "created_at"})
# SQS's RedriveAllowPolicy: who may name a queue as their dead-letter queue.
REDRIVE_PERMISSIONS = ("allowAll", "denyAll", "byQueue")
MAX_REDRIVE_SOURCES = 10
# SQS's high-throughput FIFO settings, kept in `sqs_metadata` in SQS's spelling; the queue's
# DeduplicationScope is acted on (`deduplicates_in_group`).
FIFO_MODES = {
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
MAX_TAGS = 50
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256


@dataclass(frozen=True)
class QueueAttributes:
    """A queue's settings; stored with the queue so every Broker on the root sees the same ones."""

    visibility_timeout: int = DEFAULT_VISIBILITY_SECONDS
    delay_seconds: int = 0
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    max_message_bytes: int = DEFAULT_MESSAGE_BYTES
    dead_letter_queue: str | None = None
    max_receive_count: int | None = None
    fifo: bool = False
    content_based_deduplication: bool = False
    shards: int = DEFAULT_SHARDS
    # How long a receive over the SQS endpoint waits when it names no WaitTimeSeconds (SQS's
    # ReceiveMessageWaitTimeSeconds); `Queue.receive` takes its wait as an argument.
    receive_wait_time_seconds: int = 0
    # Which queues may use this one as their dead-letter queue: SQS's RedriveAllowPolicy JSON.
    redrive_allow_policy: str | None = None
    # Labels and timestamps, as SQS keeps them with a queue; `create_queue` compares none of them.
    tags: dict[str, str] = field(default_factory=dict, compare=False)
    # SQS attributes that clients set and read back, kept in SQS's spelling: an access Policy and
    # KMS settings (not acted on), and a FIFO queue's DeduplicationScope (acted on) and
    # FifoThroughputLimit (FIFO_MODES). The SQS endpoint validates and returns them
    # (endpoint/settings.py). Not compared, as tags.
    sqs_metadata: dict[str, str] = field(default_factory=dict, compare=False)
    created_at: float = field(default=0.0, compare=False)  # epoch seconds
    modified_at: float = field(default=0.0, compare=False)

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
        if self.redrive_allow_policy is not None and not isinstance(self.redrive_allow_policy, str):
            raise InvalidParameterValue("redrive_allow_policy must be a JSON str or None")
        _check_tags(self.tags)
        if not isinstance(self.sqs_metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.sqs_metadata.items()
        ):
            raise InvalidParameterValue("sqs_metadata must be a dict of str keys to str values")

    def check_fifo_modes(self, before: QueueAttributes | None = None) -> QueueAttributes:
        """Itself, once its high-throughput FIFO modes (those that differ from `before`'s) are
        SQS's values on a FIFO queue. Checked where they are given (`create_queue`, `changed`),
        not where a registry row is read: a queue an older version stored with other values
        still opens, and takes changes of anything else."""
        for name, allowed in FIFO_MODES.items():
            value = self.sqs_metadata.get(name)
            if before is not None and value == before.sqs_metadata.get(name):
                continue
            if value is not None and (not self.fifo or value not in allowed):
                raise InvalidParameterValue(
                    f"sqs_metadata's {name} is one of {list(allowed)}, on FIFO queues only;"
                    f" got {value!r}"
                )
        return self

    @property
    def deduplicates_in_group(self) -> bool:
        """A FIFO queue whose DeduplicationScope is messageGroup: a deduplication id counts
        within its message group only (rules/deduplication.py)."""
        return self.fifo and self.sqs_metadata.get("DeduplicationScope") == "messageGroup"

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
        return dataclasses.replace(self, **changes).check_fifo_modes(self)

    def difference(self, wanted: QueueAttributes) -> str:
        """What differs from `wanted`, for QueueAlreadyExists messages."""
        compared = [f.name for f in dataclasses.fields(self) if f.compare]
        have, want = self.as_dict(), wanted.as_dict()
        return ", ".join(
            f"{k}={have[k]!r} (asked {want[k]!r})" for k in compared if have[k] != want[k]
        )


def _check_tags(tags: object) -> None:
    """SQS's tag rules: up to 50, keys of 1-128 and values of up to 256 characters."""
    if not isinstance(tags, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tags.items()
    ):
        raise InvalidParameterValue("tags must be a dict of str keys to str values")
    if len(tags) > MAX_TAGS:
        raise InvalidParameterValue(f"a queue may carry at most {MAX_TAGS} tags, got {len(tags)}")
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_TAG_KEY_LENGTH or len(value) > MAX_TAG_VALUE_LENGTH:
            raise InvalidParameterValue(
                f"tag {key[:40]!r}: keys are 1 to {MAX_TAG_KEY_LENGTH} characters, values at most"
                f" {MAX_TAG_VALUE_LENGTH}"
            )


def _redrive_sources(policy: object) -> frozenset[str] | None:
    """The queue names a RedriveAllowPolicy JSON lets in (None: any); checked as SQS checks
    it: a JSON object whose redrivePermission is allowAll, denyAll, or byQueue with 1 to 10
    sourceQueueArns (queue ARNs, or names)."""
    expected = (
        'a JSON object such as {"redrivePermission": "byQueue", "sourceQueueArns":'
        ' ["arn:aws:sqs:us-east-1:000000000000:orders"]}: redrivePermission one of'
        f" {list(REDRIVE_PERMISSIONS)}, and 1 to {MAX_REDRIVE_SOURCES} sourceQueueArns with"
        " byQueue only"
    )
    try:
        document = json.loads(policy) if isinstance(policy, str) else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise InvalidParameterValue(f"redrive_allow_policy must be {expected}")
    permission, arns = document.get("redrivePermission"), document.get("sourceQueueArns")
    by_queue = permission == "byQueue"
    valid_arns = (
        isinstance(arns, list)
        and 1 <= len(arns) <= MAX_REDRIVE_SOURCES
        and all(isinstance(arn, str) and arn for arn in arns)
    )
    wrong_sources = not valid_arns if by_queue else bool(arns)
    if permission not in REDRIVE_PERMISSIONS or wrong_sources:
        raise InvalidParameterValue(f"redrive_allow_policy must be {expected}; got {policy!r:.200}")
    if permission == "allowAll":
        return None
    return frozenset(arn.rsplit(":", 1)[-1] for arn in arns) if by_queue else frozenset()


def check_redrive_allow_policy(policy: str | None) -> None:
    """Raises InvalidParameterValue unless `policy` is a RedriveAllowPolicy SQS would take
    (checked when it is set; a stored one is read as it is, see `takes_dead_letters_from`)."""
    if policy is not None:
        _redrive_sources(policy)


def takes_dead_letters_from(redrive_allow_policy: str | None, source: str) -> bool:
    """Whether a queue with this RedriveAllowPolicy lets the queue `source` name it as its
    dead-letter queue. Sources are compared by queue name (the last part of each ARN, or a bare
    name) whatever region an ARN names: one root (one endpoint) is one namespace of queues. A
    stored policy no check ever read (set by a version that kept any text) lets every queue in,
    as that version did."""
    if redrive_allow_policy is None:
        return True
    try:
        sources = _redrive_sources(redrive_allow_policy)
    except InvalidParameterValue:
        return True
    return sources is None or source in sources

"""The values users get back: messages, queue statistics, batch outcomes and reports (no Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Message:
    """One delivered message; `receipt_handle` is the proof of this particular receive."""

    message_id: str
    body: str
    attributes: dict[str, str]
    receipt_handle: str
    receive_count: int
    sent_at: datetime
    first_received_at: datetime | None
    group_id: str | None = None
    deduplication_id: str | None = None
    sequence_number: int | None = None
    # SQS DataTypes of attributes that are not plain strings ("Number", "Binary", "String.x", ...)
    attribute_types: dict[str, str] = field(default_factory=dict)
    # The queue a move brought the message from (a dead-letter queue's message: its source; one
    # moved back: the dead-letter queue); None for a message sent to this queue.
    moved_from: str | None = None


# receive_df's and a stream's columns: a message's fields but `moved_from` (peek_df shows it), so
# that the tables they were written to before it came keep their schema.
MESSAGE_FIELDS = tuple(name for name in Message.__dataclass_fields__ if name != "moved_from")
# What a peek shows of a message: its fields but the receipt handle, and where it came from.
PEEK_FIELDS = (*(name for name in MESSAGE_FIELDS if name != "receipt_handle"), "moved_from")


@dataclass(frozen=True)
class SentMessage:
    """What a send accepted: the message's id (a FIFO duplicate's: the one it repeats) and, on a
    FIFO queue, its sequence number, the one its receivers see (read back after the commit that
    assigned it; None on standard queues)."""

    message_id: str
    sequence_number: int | None = None


@dataclass(frozen=True)
class QueueStats:
    """A snapshot of a queue's depth, like SQS's Approximate* metrics; on a standard queue also
    its tenants' (message groups': fair queues), like SQS's metrics of noisy and quiet groups.
    With no noisy tenant the quiet ones' figures are the queue's; a FIFO queue has no tenants."""

    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float
    awaiting_dead_letter: int
    noisy_groups: int = 0
    quiet_visible: int = 0
    quiet_in_flight: int = 0
    quiet_delayed: int = 0
    quiet_oldest_age_seconds: float = 0.0


@dataclass(frozen=True)
class BatchResult:
    """Per-entry outcome of a batch: handles that succeeded, and failed handle -> error code."""

    successful: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueRedrive:
    """What one pass of the redrive job did to one queue."""

    queue: str
    moved_to_dead_letter: int
    released: int
    expired_by_retention: int
    duration_seconds: float
    upkeep: bool


@dataclass(frozen=True)
class RedriveReport:
    """One pass of the redrive job: counts per queue and in total, and the queues whose part
    failed (name -> the error), which the next pass tries again."""

    queues: dict[str, QueueRedrive] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def moved_to_dead_letter(self) -> int:
        return sum(q.moved_to_dead_letter for q in self.queues.values())

    @property
    def released(self) -> int:
        return sum(q.released for q in self.queues.values())

    @property
    def expired_by_retention(self) -> int:
        return sum(q.expired_by_retention for q in self.queues.values())


@dataclass(frozen=True)
class ConsumeReport:
    """What a worker loop did, and why it stopped."""

    batches: int
    received: int
    deleted: int
    failed: int
    handler_errors: int
    stopped_by: str  # "max_batches", "empty", "stop" or a signal name such as "SIGTERM"


@dataclass(frozen=True)
class MessageEvent:
    """One step in a message's life, read back from its queues' Delta tables (Queue.history).

    `kind` is one of EVENT_KINDS; `at` is the commit's time (UTC) and `version` the table version
    that recorded it; `detail` carries the step's own facts (its queue always, and e.g.
    {"to": "orders-dlq"} or {"visible_until": ...})."""

    kind: str
    at: datetime
    version: int
    receive_count: int
    detail: dict[str, object] = field(default_factory=dict)


EVENT_KINDS = (
    "sent",
    "received",
    "visibility_changed",
    "released",
    "moved_out",
    "moved_in",
    "deleted",
    "expired",
)

"""The row states of a queue table, written once as expressions (rules/expr.py) that both engines
render: receivers, acknowledgements, the redrive job and inspection all ask these."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from ..attributes import QueueAttributes
from ..limits import TOMBSTONE_LIFETIME
from ..rules import handles
from ..rules.expr import Expr, coalesce, col, lit, micros, null, timestamp_of_micros
from ..rules.handles import MOVE_MARKER_PREFIX

# Tombstones live in this partition: emptied rows of deleted FIFO messages (their deduplication ids
# still count for a while) and of batches the worker loop finished; the redrive job drops them.
TOMBSTONE_SHARD = -1


def all_shards(attrs: QueueAttributes) -> list[int]:
    """Every partition of a queue's table: its shards and the tombstones'."""
    return [*range(attrs.shards), TOMBSTONE_SHARD]


def not_duplicate(duplicates: list[str]) -> Expr:
    """Rows other than these never-delivered FIFO duplicates (judged by rules/deduplication.py
    on the very rows read: fifo_queue.FifoSnapshot)."""
    return ~col("message_id").isin(duplicates)


def id_range(ids: Iterable[str]) -> Expr:
    """Rows whose id lies between the least and the greatest of `ids`: implied by any list of
    those ids, and added beside it to every statement that names rows by id.

    Statistics can use a range where they cannot use a long list: delta-rs (through DataFusion's
    pruning, which skips a file by its min/max only for IN lists of a few values) would otherwise
    read every file of the named shards to find the rows to rewrite, and count every file
    appended to them meanwhile as a conflict, such as a producer's sends, whose ids are newer."""
    named = list(ids)
    return (col("message_id") >= lit(min(named))) & (col("message_id") <= lit(max(named)))


def nearness(first: int, shards: int) -> Expr:
    """How far a row's shard lies after `first`, going round: the order in which a bulk claim
    takes shards (from one random shard, so that bulk claimers rarely collide, then its
    neighbours), each shard's messages oldest first."""
    return (col("shard") - lit(first) + lit(shards)) % lit(shards)


def issued_handle(secret: str, token: str) -> Expr:
    """The receipt handle a claim made with `token` gives each row it takes, computed by the
    engine row by row: what a claim writes and what finds its rows again."""
    return handles.issue_expr(secret, token, col("shard"), col("message_id"))


def is_message() -> Expr:
    """A message rather than a FIFO deduplication tombstone."""
    return col("shard") != TOMBSTONE_SHARD


def _within_retention(now: datetime, attrs: QueueAttributes) -> Expr:
    return col("sent_at") > lit(now - timedelta(seconds=attrs.retention_seconds))


def alive(now: datetime, attrs: QueueAttributes) -> Expr:
    """A message within the retention period, counted from the original send."""
    return is_message() & _within_retention(now, attrs)


def past_retention(now: datetime, attrs: QueueAttributes) -> Expr:
    """Messages the redrive job removes: retention over and no move in progress."""
    return is_message() & ~_within_retention(now, attrs) & ~being_moved()


def spent_tombstone(now: datetime) -> Expr:
    """A tombstone whose deduplication window (and grace, see fifo/spark.py) has passed."""
    return (col("shard") == TOMBSTONE_SHARD) & due(now)


def due(now: datetime) -> Expr:
    """Visible now: never hidden, delay over, or visibility timeout expired."""
    return col("visible_at") <= lit(now)


def being_moved() -> Expr:
    """Marked by a move that has not finished (see moves/steps.py); never null."""
    return coalesce(col("receipt_handle").starts_with(MOVE_MARKER_PREFIX), lit(False))


def awaiting_dead_letter(attrs: QueueAttributes) -> Expr:
    """Messages that used up their receives: only the redrive job may move them on."""
    if attrs.max_receive_count is None:
        return lit(False)
    return col("receive_count") >= attrs.max_receive_count


def claimable(now: datetime, attrs: QueueAttributes) -> Expr:
    """Visible now, within retention, not waiting for the dead-letter queue, not being moved."""
    return due(now) & alive(now, attrs) & ~awaiting_dead_letter(attrs) & ~being_moved()


def in_flight(now: datetime) -> Expr:
    """Received and still hidden: what SQS's in-flight limit counts."""
    return col("receipt_handle").is_not_null() & (col("visible_at") > lit(now))


def expired_in_flight(now: datetime) -> Expr:
    """Received, and its visibility timeout has run out: its handle is void once released."""
    return col("receipt_handle").is_not_null() & due(now) & ~being_moved()


def tombstone_values() -> dict[str, Expr]:
    """An emptied row in the tombstone shard that keeps its id, deduplication id and send time."""
    return {
        "shard": lit(TOMBSTONE_SHARD, "int"),  # typed: the column's own 32 bits in every engine
        "body": lit(""),
        "attributes": null("map"),
        "attribute_types": null("map"),
        "receipt_handle": null("string"),
        "visible_at": timestamp_of_micros(
            micros(col("sent_at")) + int(TOMBSTONE_LIFETIME.total_seconds() * 1_000_000)
        ),
        "handle_issued_at": null("timestamp"),
    }


def retire(attrs: QueueAttributes) -> dict[str, Expr] | None:
    """How a queue's table lets go of rows (Storage.change_where values): FIFO keeps tombstones,
    standard deletes."""
    return tombstone_values() if attrs.fifo else None


def exhausted(now: datetime, attrs: QueueAttributes) -> Expr:
    """Messages due for the dead-letter queue: receives used up and the last one timed out."""
    return due(now) & alive(now, attrs) & awaiting_dead_letter(attrs) & ~being_moved()


def releasable(now: datetime, attrs: QueueAttributes) -> Expr:
    """Expired receives the redrive job makes plainly visible again (their handles void)."""
    return expired_in_flight(now) & ~awaiting_dead_letter(attrs)

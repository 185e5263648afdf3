"""Creating and deleting queues so that a crash at any point leaves nothing behind for good.

A queue is registered before its table is created, and its tables are dropped before it is
unregistered: a crash in between leaves a registered queue whose table is missing or half gone,
which the next `create_queue` of that name completes (creating the table) and the next
`delete_queue` finishes. A lookup (`get_queue`) never creates: racing a delete, it would bring
back the table just dropped. No table is ever left that the registry does not name.
"""

from __future__ import annotations

import dataclasses

from ..attributes import QueueAttributes, check_redrive_allow_policy, takes_dead_letters_from
from ..errors import InvalidParameterValue, QueueAlreadyExists, QueueDoesNotExist
from ..rules.handles import new_token
from ..store.registry import QueueRecord
from ..store.schema import (
    FIFO_TABLE_PROPERTIES,
    MESSAGE_COLUMNS,
    MESSAGE_PARTITIONING,
    QUEUE_TABLE_PROPERTIES,
)
from .context import QueueContext


def create_queue(ctx: QueueContext, name: str, attributes: QueueAttributes) -> None:
    """Creates the queue, or accepts it when it exists with exactly these attributes.

    Registering is tried first (one MERGE that inserts only an absent name): a new queue costs no
    registry read beyond the dead-letter queue's."""
    check_dead_letter_queue(ctx, name, attributes)
    stamp = ctx.now().timestamp()
    attributes = dataclasses.replace(attributes, created_at=stamp, modified_at=stamp)
    location = ctx.tables.layout.new_queue(name)
    record = QueueRecord(name, attributes, new_token(), location)
    ctx.tables_for(record)  # an engine that cannot write it says so before anything is written
    if ctx.registry.insert_if_absent(record):
        ensure_table(ctx, record)
        return
    existing = ctx.registry.get(name, fresh=True)
    if existing is None:
        raise QueueAlreadyExists(f"queue {name!r} was created and deleted concurrently; retry")
    if existing.attributes != attributes:
        raise QueueAlreadyExists(
            f"queue {name!r} already exists with different attributes:"
            f" {existing.attributes.difference(attributes)}"
        )
    ensure_table(ctx, existing)


def ensure_table(ctx: QueueContext, record: QueueRecord) -> None:
    """The queue's table, created if a crash left the queue registered without it (once per
    process and table; afterwards free). A FIFO table is numbered by whoever creates it: the
    native engine numbers its own (store/native_fifo.py); Spark's use Delta row tracking."""
    tables, properties = ctx.tables, QUEUE_TABLE_PROPERTIES
    if record.attributes.fifo and ctx.tables.engine == "spark":
        properties = FIFO_TABLE_PROPERTIES
    tables.ensure_table(
        record.location, MESSAGE_COLUMNS, partition_by=MESSAGE_PARTITIONING, properties=properties
    )


def open_table(ctx: QueueContext, record: QueueRecord) -> None:
    """A lookup's check of the queue's table: upgraded if an older version wrote it, never
    created (a lookup racing `delete_queue` must not bring back the table it dropped). Only
    Spark upgrades a row-tracking FIFO table (delta-rs cannot write it)."""
    tables = ctx.spark_tables if ctx.spark_only(record) and ctx.spark_tables else ctx.tables
    if not tables.upgrade_table(record.location, MESSAGE_COLUMNS):
        raise QueueDoesNotExist(
            f"queue {record.name!r} is registered but has no table: its creation was interrupted"
            " (create_queue with the same attributes finishes it) or it is being deleted"
        )


def delete_queue(ctx: QueueContext, name: str) -> None:
    """Drops the queue's tables (messages and receive_df claims), then unregisters it."""
    record = ctx.record(name, fresh=True)
    ctx.small_files.settle(record.location)  # no compaction of this broker's writes into it
    ctx.tables.drop_table(record.location)
    ctx.tables.drop_table(ctx.tables.layout.claims(record.location))
    if not ctx.registry.remove(record):
        raise QueueDoesNotExist(f"queue {name!r} does not exist")


def check_dead_letter_queue(
    ctx: QueueContext,
    name: str,
    attributes: QueueAttributes,
    before: QueueAttributes | None = None,
) -> None:
    """Checks what creating a queue with `attributes`, or changing its attributes from `before`
    to them, sets: a redrive_allow_policy SQS would take; a dead-letter queue that exists on this
    broker, is of the same type, is not the queue itself and lets it in (its
    redrive_allow_policy). What a change leaves as it was is not checked again, as in SQS."""
    if before is None or attributes.redrive_allow_policy != before.redrive_allow_policy:
        check_redrive_allow_policy(attributes.redrive_allow_policy)
    target = attributes.dead_letter_queue
    if target is None or (before is not None and before.dead_letter_queue == target):
        return
    if target == name:
        raise InvalidParameterValue(f"queue {name!r} cannot be its own dead-letter queue")
    record = ctx.registry.get(target, fresh=True)
    if record is None:
        raise InvalidParameterValue(
            f"dead_letter_queue {target!r} does not exist; create it first on this broker"
        )
    if record.attributes.fifo != attributes.fifo:
        kind = "FIFO" if attributes.fifo else "standard"
        raise InvalidParameterValue(
            f"the dead-letter queue of a {kind} queue must be {kind} too; {target!r} is not"
        )
    if not takes_dead_letters_from(record.attributes.redrive_allow_policy, name):
        raise InvalidParameterValue(
            f"the redrive_allow_policy of {target!r} does not let {name!r} use it as its"
            " dead-letter queue"
        )

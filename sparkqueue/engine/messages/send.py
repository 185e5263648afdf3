"""Sending: user input validated into message rows, then written in one commit per call (a blind
append on standard queues; FIFO: see fifo/operations.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ...attributes import QueueAttributes
from ...clock import to_micros
from ...errors import EmptyBatchRequest, InvalidParameterValue, UnsupportedOperation
from ...limits import (
    MAX_DELAY_SECONDS,
    SEND_ROUND_MAX_BYTES,
    SEND_ROUND_MAX_ROWS,
    SPREAD_SEND_ROWS,
)
from ...model import SentMessage
from ...rules.checks import check_int, check_list
from ...rules.deduplication import deduplication_key
from ...rules.expr import Expr, col
from ...rules.ids import content_deduplication_id, new_message_id
from ...rules.validation import (
    check_attribute_types,
    check_attributes,
    check_fifo_options,
    check_identifier,
    check_size,
    check_text,
    message_size,
)
from ...store.registry import QueueRecord
from ...store.schema import MESSAGE_COLUMNS
from ..conditions import id_range
from ..context import QueueContext
from ..fifo import operations as fifo_ops

ENTRY_KEYS = (
    "body", "delay_seconds", "attributes", "group_id", "deduplication_id", "attribute_types"
)  # fmt: skip


@dataclass(frozen=True)
class SendEntry:
    """One validated message to write."""

    body: str
    attributes: dict[str, str]
    group_id: str | None
    deduplication_id: str | None
    delay_seconds: int
    attribute_types: dict[str, str]


def normalize_entry(entry: str | dict[str, Any], attrs: QueueAttributes) -> SendEntry:
    """Validates one send/send_batch entry against the queue's rules."""
    if isinstance(entry, str):
        entry = {"body": entry}
    if not isinstance(entry, dict):
        raise InvalidParameterValue(
            f"an entry is a str body or a dict with the keys {list(ENTRY_KEYS)}, got"
            f" {type(entry).__name__}"
        )
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise InvalidParameterValue(f"unknown entry key(s) {unknown}; allowed: {list(ENTRY_KEYS)}")
    if "body" not in entry:
        raise InvalidParameterValue("an entry dict needs a 'body'")
    body = check_text("the body", entry["body"])
    attributes = check_attributes(entry.get("attributes"))
    attribute_types = check_attribute_types(entry.get("attribute_types"), attributes)
    check_size(message_size(body, attributes), attrs.max_message_bytes)
    group_id = check_identifier("group_id", entry.get("group_id"))
    deduplication_id = check_identifier("deduplication_id", entry.get("deduplication_id"))
    delay = entry.get("delay_seconds")
    if attrs.fifo:
        check_fifo_options(delay, group_id, deduplication_id, attrs)
        if deduplication_id is None:
            deduplication_id = content_deduplication_id(body)
    if delay is None:
        delay = attrs.delay_seconds
    check_int("delay_seconds", delay, 0, MAX_DELAY_SECONDS, sqs_name="DelaySeconds")
    return SendEntry(body, attributes, group_id, deduplication_id, delay, attribute_types)


def _key(entry: SendEntry, in_group: bool) -> str | None:
    """The row's deduplication key (a FIFO send's; a standard one's id is kept as given)."""
    if entry.deduplication_id is None or entry.group_id is None:
        return entry.deduplication_id
    return deduplication_key(entry.deduplication_id, entry.group_id, in_group=in_group)


def checked_entries(
    what: str, entries: Sequence[str | dict[str, Any]], record: QueueRecord
) -> list[SendEntry | InvalidParameterValue]:
    """Each entry of a batch validated, or the error that keeps it out (EmptyBatchRequest for
    none at all)."""
    entries = check_list(what, entries, "bodies or entry dicts")
    if not entries:
        raise EmptyBatchRequest(f"{what} needs at least one entry")
    outcomes: list[SendEntry | InvalidParameterValue] = []
    for entry in entries:
        try:
            outcomes.append(normalize_entry(entry, record.attributes))
        except InvalidParameterValue as error:
            outcomes.append(error)
    return outcomes


def send_valid(
    ctx: QueueContext, name: str, outcomes: list[SendEntry | InvalidParameterValue]
) -> list[SentMessage | InvalidParameterValue]:
    """Sends the valid entries in one commit; per entry what it sent, or its error."""
    valid = [o for o in outcomes if isinstance(o, SendEntry)]
    sent = iter(send_entries(ctx, ctx.record(name), valid) if valid else [])
    return [next(sent) if isinstance(o, SendEntry) else o for o in outcomes]


def send_entries(
    ctx: QueueContext,
    record: QueueRecord,
    entries: list[SendEntry],
    *,
    once: tuple[str, int] | None = None,
) -> list[SentMessage]:
    """Writes validated entries in one commit, to one random shard or spread over all of them
    (a standard queue: `shards_of`) or each to its group's shard (FIFO); returns their ids (on FIFO queues, a duplicate gets the id of the
    message it repeats) and, on FIFO queues, the sequence numbers the commit gave them.

    A standard queue's sends from concurrent callers of one broker share commits (a round of
    the queue's send committer, see rounds/committer.py): one append carries every caller's rows, each
    caller's placed by `shards_of`, so a producer's send waits for no other producer's commit.

    `once` = (app id, version): the commit records them, and a send whose app id the table
    holds at that version or later is skipped: a stream's batch that Spark replays
    after a crash is not sent again. On a FIFO queue the deduplication ids of the repeat say so
    instead, within their 5-minute window."""
    now = ctx.now()
    micros = to_micros(now)
    in_group = record.attributes.deduplicates_in_group
    rows = [
        {"shard": shard, "message_id": new_message_id(micros), "body": entry.body,
         "attributes": entry.attributes, "group_id": entry.group_id,
         "deduplication_id": _key(entry, in_group), "sequence_number": None, "sent_at": now,
         "visible_at": now + timedelta(seconds=entry.delay_seconds), "receipt_handle": None,
         "receive_count": 0, "first_received_at": None, "handle_issued_at": None,
         "moved_from": None, "attribute_types": entry.attribute_types or None}
        for entry, shard in zip(entries, shards_of(len(entries), record.attributes.shards), strict=True)
    ]  # fmt: skip
    if record.attributes.fifo:
        return fifo_ops.send(ctx, record, rows)
    if once is not None:  # alone, as its commit records the app id (a native commit's txn)
        app_id, version = once
        tables = ctx.native
        if tables is None:
            raise UnsupportedOperation(
                "a send recorded by app id and version is the native engine's"
            )
        what = f"sending to {record.name!r}"
        tables.append_rows(
            record.location, MESSAGE_COLUMNS, rows, what, app_id=app_id, app_version=version,
            within=_new_ids(rows),
        )  # fmt: skip
        ctx.appended(record)
        return [SentMessage(row["message_id"]) for row in rows]
    committer = ctx.commits.of(f"{record.location}#sends", _fitting)
    return committer.submit(rows, lambda sends: _append_round(ctx, record, sends))


def shards_of(count: int, shards: int) -> list[int]:
    """The shard of each of a send's `count` rows: one random shard, or (SPREAD_SEND_ROWS rows
    or more) consecutive runs of about count / shards rows on every shard, from a random one.
    FIFO rows go to their group's shard instead (fifo_ops.send)."""
    first = random.randrange(shards)
    if count < SPREAD_SEND_ROWS:
        return [first] * count
    return [(first + i * shards // count) % shards for i in range(count)]


def _fitting(sends: Sequence[list[dict[str, Any]]]) -> int:
    """The oldest sends whose rows fit one append (SEND_ROUND_MAX_ROWS rows, SEND_ROUND_MAX_BYTES
    of bodies); a larger send runs alone."""
    rows = size = 0
    for count, send in enumerate(sends):
        rows += len(send)
        size += sum(message_size(row["body"], row["attributes"]) for row in send)
        if count and (rows > SEND_ROUND_MAX_ROWS or size > SEND_ROUND_MAX_BYTES):
            return count
    return len(sends)


def _append_round(
    ctx: QueueContext, record: QueueRecord, sends: list[list[dict[str, Any]]]
) -> list[list[SentMessage]]:
    rows = [row for send in sends for row in send]
    what = f"sending to {record.name!r}"
    ctx.tables.append_rows(record.location, MESSAGE_COLUMNS, rows, what, within=_new_ids(rows))
    if ctx.tables is ctx.native:
        ctx.appended(record)
    return [[SentMessage(row["message_id"]) for row in send] for send in sends]


def _new_ids(rows: list[dict[str, Any]]) -> Expr:
    """The rows' shards and the range of their ids, new at this send (ids sort by send time):
    what its append is checked against, so that a claim or delete of older messages committed
    meanwhile does not fail it, nor another producer's send to other shards (statements.py
    `append_rows`)."""
    shards = sorted({row["shard"] for row in rows})
    return col("shard").isin(shards) & id_range(row["message_id"] for row in rows)

"""A stream's batches: claims made with a token of their own and found again by it alone.

Spark's streaming source (datasource/stream.py) claims each micro-batch with a new token: on a
standard queue in one UPDATE of every claimable message in a range of ids per shard (the oldest,
as `receive_df` takes them), on a FIFO queue through the receive's own claim of group prefixes
(rounds/operations.py). Spark's offset log keeps only the token and each shard's range of
claimed ids. The rows that still hold a handle issued from that token are the batch's
(messages/bulk.py, `held_by`): what its tasks read, what a restart replays, what its heartbeat
extends and what Spark's commit of the batch lets go.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pyarrow as pa

from ..errors import OverLimit
from ..limits import MAX_RECEIVE
from ..model import MESSAGE_FIELDS
from ..rules import handles
from ..rules.deduplication import as_given
from ..rules.expr import col, lit
from ..store.native_sql import select_statement
from ..store.registry import QueueRecord
from .conditions import claimable, is_message
from .context import QueueContext
from .messages import bulk
from .messages.acknowledge import retire_where
from .messages.bulk import BatchClaim, held_by
from .messages.visibility import within_ceiling
from .rounds import operations as rounds
from .rounds.requests import Ask


def claim_batch(
    ctx: QueueContext, record: QueueRecord, wanted: int, visibility_timeout: int
) -> list[BatchClaim]:
    """Claims up to `wanted` messages; fewer when the queue has fewer visible (or its in-flight
    limit is reached: then what was claimed, as SQS answers). A FIFO queue's are the receive's
    group prefixes, MAX_RECEIVE a claim; a standard queue's one claim by range."""
    if not record.attributes.fifo:
        try:
            found = bulk.claim_oldest(ctx, record, wanted, visibility_timeout)
        except OverLimit:
            return []
        return [found[0]] if found is not None and found[0].count else []
    claims: list[BatchClaim] = []
    remaining = wanted
    while remaining > 0:
        token = handles.new_token()
        asked = min(remaining, MAX_RECEIVE)
        answer = rounds.submit(
            ctx, record, Ask(wanted=asked, timeout=visibility_timeout, token=token)
        )
        if not answer.claimed:
            break
        claims.append(BatchClaim.of(token, answer.claimed))
        remaining -= len(answer.claimed)
        if len(answer.claimed) < asked:
            break
    return claims


def extend(
    ctx: QueueContext, record: QueueRecord, claims: Sequence[BatchClaim], seconds: int
) -> int:
    """Hides the batch's messages for `seconds` from now (a heartbeat, or a replay making them
    its own again), within SQS's 12 hours from their receive; how many were still held."""
    if not claims:
        return 0
    until = lit(ctx.now() + timedelta(seconds=seconds))
    rows = held_by(record, claims) & within_ceiling(until, col("handle_issued_at"))
    return ctx.tables_for(record).change_where(
        record.location, rows, f"extending a stream's batch on {record.name!r}",
        values={"visible_at": until},
    )  # fmt: skip


def finish(ctx: QueueContext, record: QueueRecord, claims: Sequence[BatchClaim]) -> int:
    """Lets go of the batch's messages once Spark committed it (deletes them, tombstones on a
    FIFO queue, as every delete); how many it still held."""
    if not claims:
        return 0
    rule = held_by(record, claims) & is_message()
    what = f"deleting a stream's committed batch from {record.name!r}"
    return retire_where(ctx, ctx.tables_for(record), record, rule, what)


def task_shards(claims: Sequence[BatchClaim], rows_per_task: int) -> list[list[int]]:
    """The batch's shards dealt to tasks of about `rows_per_task` claimed rows each (at least
    one task): a small batch is one task, since each task pays a fixed price to start."""
    shards = sorted({shard for claim in claims for shard in claim.shards})
    rows = sum(claim.count for claim in claims)
    tasks = max(1, min(len(shards), -(-rows // rows_per_task)))
    return [shards[i::tasks] for i in range(tasks)]


def read_visible(ctx: QueueContext, record: QueueRecord, shard: int) -> pa.Table:
    """The messages of `shard` visible now, unclaimed and untouched (a batch read's task): the
    receipt handle is left out, as a peek leaves it."""
    tables = bulk.native(ctx, record)
    columns = as_given([name for name in MESSAGE_FIELDS if name != "receipt_handle"])
    visible = claimable(ctx.now(), record.attributes) & (col("shard") == shard) & is_message()
    statement = select_statement(columns, visible, order_by=["sent_at", "message_id"])
    return tables.arrow(record.location, statement, at=tables.open(record.location))

"""The Spark engine's form of a large shared round (see statement.py): one MERGE whose source
lists every row with what it becomes; retired rows become tombstones, as in the UPDATE form. The
rows' rules are the same expressions the UPDATE uses, rendered for the MERGE's target."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ..clock import to_micros
from ..rules.expr import col, timestamp_of_micros
from ..store.counts import Counts
from ..store.spark_exprs import to_column
from .conditions import claimable, tombstone_values
from .merges import keyed_merge
from .statement import RoundChanges
from .visibility import new_times, within_ceiling

_RETIRE, _CHANGE, _CLAIM = "retire", "change", "claim"
_SOURCE = (
    "op string, shard int, message_id string, receipt_handle string, expected_count int,"
    " visible_us long"
)


def by_merge(round_: RoundChanges) -> Counts:
    """Runs the round as one MERGE; what it changed."""
    ctx, record, now = round_.ctx, round_.record, round_.now
    source = ctx.storage.spark.createDataFrame(_rows(round_), _SOURCE)
    t = ctx.storage.target_prefix(record.location)
    op = F.col("s.op")
    held = F.col(f"{t}receipt_handle") == F.col("s.receipt_handle")
    until = F.timestamp_micros(F.col("s.visible_us"))
    as_read = F.col(f"{t}receive_count") == F.col("s.expected_count")
    values = {name: to_column(v) for name, v in round_.claim_values(col("visible_at")).items()}
    claim = {**values, "visible_at": until, "receipt_handle": F.col("s.receipt_handle")}
    # The 12-hour rule, with the new time from the source and the handle's from the target.
    ceiling = within_ceiling(timestamp_of_micros(col("s.visible_us")), col(f"{t}handle_issued_at"))
    tombstone = {name: to_column(value, t) for name, value in tombstone_values().items()}
    return (
        keyed_merge(ctx, record, source, sorted(set(round_.shards())))
        .update(tombstone, (op == _RETIRE) & held)
        .update(
            {"visible_at": until},
            (op == _CHANGE) & held & (F.col(f"{t}visible_at") > F.lit(now)) & to_column(ceiling),
        )
        .update(claim, (op == _CLAIM) & to_column(claimable(now, record.attributes), t) & as_read)
        .execute()
    )


def _rows(round_: RoundChanges) -> list[tuple[Any, ...]]:
    """The MERGE's source: each row, what is done to it, and the handle it must (or will)
    hold; a change's and a claim's new visible_at as exact epoch microseconds."""
    until = new_times(round_.changes, round_.now)
    rows: list[tuple[Any, ...]] = [
        (_RETIRE, ref.shard, ref.message_id, ref.handle, None, None) for ref in round_.retire
    ]
    rows += [
        (_CHANGE, ref.shard, ref.message_id, ref.handle, None, to_micros(until[ref.handle]))
        for ref, _ in round_.changes
    ]
    rows += [
        (
            _CLAIM,
            row.shard,
            row.message_id,
            round_.issued[row.message_id],
            row.receive_count,
            to_micros(round_.claimed_until[row.message_id]),
        )
        for row in round_.found
    ]
    return rows

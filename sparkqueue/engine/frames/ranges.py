"""Bulk claims by range on standard queues: `receive_df` and `delete_df` without joins.

A standard queue's `receive_df` claims, in each shard it takes, every claimable message up to a
bound: the lowest message ids (ids sort by send time, so this is oldest first). The claim is then
one UPDATE on literal predicates (shard, `message_id <= bound`, claimable now) that writes each
row's new handle from the claim's token, instead of a MERGE that joins every claimed row. Why the
range holds exactly what was read: the claim fixes one `now`, and after the read a row can only
stop being claimable at that `now` (claims, deletes and visibility changes all write a later
`visible_at`), so when the UPDATE's count equals the staged count the two sets are the same.
Clocks of different drivers may disagree, so that argument is only trusted when no other commit
since the read changed a file of the claim's shards (the table's version moved by one, or the log
entries in between touch other shards only); otherwise, and when the session reports no counts,
`reconcile` compares what the table holds with the stage.

The DataFrame `receive_df` returns remembers its claim, so `delete_df` of that very DataFrame
deletes by the claim (the range and the handles its token issued) instead of joining every handle;
any other DataFrame (a filtered or partial batch) takes the per-handle path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...rules.expr import Expr, any_of, col, lit
from ...store.dml import in_list
from ...store.spark_exprs import to_column
from ...store.storage import Storage
from ..conditions import issued_handle


@dataclass(frozen=True)
class RangeClaim:
    """One `receive_df` claim: in each shard, the claimable messages up to a message id."""

    location: str
    token: str
    bounds: tuple[tuple[int, str], ...]  # (shard, highest message id claimed there)
    count: int

    @property
    def shards(self) -> list[int]:
        return [shard for shard, _ in self.bounds]

    def range(self) -> Expr:
        """The range: a literal shard list first, so Delta prunes files and conflicts to it."""
        ranges = [
            (col("shard") == shard) & (col("message_id") <= lit(highest))
            for shard, highest in self.bounds
        ]
        return col("shard").isin(self.shards) & any_of(ranges)

    def held_rows(self, secret: str) -> Expr:
        """Rows in the range that still hold this claim's handle (whichever engine reads it)."""
        return self.range() & (col("receipt_handle") == issued_handle(secret, self.token))

    def rows(self) -> Column:
        return to_column(self.range())

    def held(self, secret: str) -> Column:
        return to_column(self.held_rows(secret))


def bounds_observed(shards: list[int]) -> list[Column]:
    """Aggregates an append observes to learn each shard's highest staged id and row count."""
    return [
        aggregate
        for shard in shards
        for aggregate in (
            F.max(F.when(F.col("shard") == shard, F.col("message_id"))).alias(f"high_{shard}"),
            F.count(F.when(F.col("shard") == shard, 1)).alias(f"rows_{shard}"),
        )
    ]


def bounds_of(observed: dict[str, object], shards: list[int]) -> dict[int, tuple[str, int]]:
    """Per shard that staged any row: (highest id, rows), from `bounds_observed`'s values."""
    return {
        shard: (str(observed[f"high_{shard}"]), int(observed[f"rows_{shard}"]))  # type: ignore[call-overload]
        for shard in shards
        if observed[f"rows_{shard}"]
    }


def reconcile(
    storage: Storage,
    location: str,
    claims_table: str,
    claim: RangeClaim,
    secret: str,
    release: dict[str, Column],
) -> int:
    """Makes the stage equal what the UPDATE claimed; returns how many that is.

    Runs after the claim committed, in steps that are each their own transaction and safe to
    repeat, so a conflict in one retries that step, never the claim. Rows the UPDATE claimed
    beyond the stage (a send whose id was made before the claim's read committed after it; a
    message moved back with its old id; clocks that disagree) are released with `release`, as
    if their receive had never happened; then staged rows whose handle the table does not hold
    (taken by someone else first) leave the stage.
    """
    staged = storage.read(claims_table).where(F.col("claim_id") == claim.token)

    def release_extra() -> None:
        held = storage.read(location).where(claim.held(secret)).select("message_id")
        extra = [row.message_id for row in held.join(staged, "message_id", "left_anti").collect()]
        if extra:  # rows already released no longer hold the handle: a repeat finds none
            storage.change(
                location,
                claim.held(secret) & in_list("message_id", extra),
                ("shard", "message_id"),
                release,
            )

    storage.transact(location, release_extra, "releasing rows a claim took beyond its stage")
    held = storage.read(location).where(claim.held(secret)).select("message_id").persist()
    try:
        holding = held.count()  # fixes `held` for the trim below
        keep_only(storage, claims_table, claim.token, held)
        return holding
    finally:
        held.unpersist()


def keep_only(storage: Storage, claims_table: str, token: str, kept: DataFrame) -> None:
    """Removes the claim's staged rows whose message id is not in `kept` (lost to others).

    A DELETE on the claim's own partition (a literal `claim_id`), so it never conflicts with other
    claims staging beside it, as a MERGE that deletes unmatched rows would: that one reads the
    whole table.
    """
    staged = storage.read(claims_table).where(F.col("claim_id") == token).select("message_id")
    lost = [row.message_id for row in staged.join(kept, "message_id", "left_anti").collect()]
    if not lost:
        return
    rows = (F.col("claim_id") == token) & in_list("message_id", lost)
    storage.transact(
        claims_table,
        lambda: storage.change(claims_table, rows, ("claim_id", "message_id")),
        "trimming a claim",
    )


def claim_of(
    claims: Mapping[DataFrame, RangeClaim], frame: DataFrame, location: str
) -> RangeClaim | None:
    """The claim `frame` was returned for (`QueueContext.range_claims`), when it is that very
    DataFrame of this queue."""
    claim = claims.get(frame)
    return claim if claim is not None and claim.location == location else None

"""The one statement a shared round commits on a standard queue (see rounds/standard.py).

A round retires messages (deletes whose handles still hold), moves the visibility of others (the
changes whose handles still hold), and claims candidates still as they were read, each with its
own caller's visibility timeout. Done one after the other that would be a commit each, every one
rebuilding the table's state and planning its own jobs; here one statement carries them all:
- small rounds: one UPDATE on literal shards and ids. Retired messages become tombstones (the
  emptied row in the tombstone shard, as FIFO deletes leave; the redrive job drops them). An
  UPDATE cannot delete, but it costs less than a MERGE (no source DataFrame to materialize);
- larger rounds: one MERGE whose source lists every row with what it becomes (retired rows
  become the same tombstones), whose join beats the UPDATE's long literal lists on both engines
  (the native engine's source is an Arrow table: docs/performance.md, "Scaling").
The statement's counts settle every part, so nothing is read back unless a handle was superseded
or another receiver won a candidate first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ...clock import to_micros
from ...limits import EXCHANGE_UPDATE_MAX_ROWS
from ...rules.expr import Expr, any_of, col, lit, source, timestamp_of_micros, when
from ...rules.handles import HandleRef
from ...store.counts import Counts
from ...store.registry import QueueRecord
from ...store.schema import Columns
from ...store.statements import ListedMerge, Row
from ..conditions import claimable, id_range, issued_handle, tombstone_values
from ..context import QueueContext
from ..messages.claim import claim_values, still_claimable
from ..messages.visibility import extension, new_times, within_ceiling


@dataclass(frozen=True)
class RoundChanges:
    """What one attempt of a round writes, and the `now` it was planned at."""

    ctx: QueueContext
    record: QueueRecord
    now: datetime
    retire: list[HandleRef]
    changes: list[tuple[HandleRef, int]]
    found: list[Row]  # candidates as read
    issued: dict[str, str]  # candidate id -> the handle it gets
    claimed_until: dict[str, datetime]  # candidate id -> its visible_at once claimed
    token: str  # the token the issued handles were made with

    @property
    def rows(self) -> int:
        return len(self.retire) + len(self.changes) + len(self.found)

    def merge_pays(self) -> bool:
        """Whether the MERGE form should carry this round (see the module's notes)."""
        # A MERGE fails when two source rows meet one target row; an UPDATE takes the first kind.
        ids = [ref.message_id for ref in self.retire] + [ref.message_id for ref, _ in self.changes]
        most = EXCHANGE_UPDATE_MAX_ROWS[self.ctx.tables_for(self.record).engine]
        return self.rows > most and len(set(ids)) == len(ids)

    def by_merge(self) -> Counts:
        """The round as one MERGE whose source lists each row with what is done to it, the
        handle it must (or will) hold and its new visible_at; the rules are the UPDATE's."""
        until = new_times(self.changes, self.now)
        # Each distinct instant converted once, rows by item, not attribute: a round may carry
        # thousands of rows, claimed until a few instants.
        us = {at: to_micros(at) for at in {*until.values(), *self.claimed_until.values()}}
        rows = [_source(RETIRE, ref) for ref in self.retire]
        rows += [_source(CHANGE, ref, until_us=us[until[ref.handle]]) for ref, _ in self.changes]
        rows += [
            _source(
                CLAIM,
                HandleRef(self.issued[row["message_id"]], row["shard"], row["message_id"]),
                count=row["receive_count"],
                until_us=us[self.claimed_until[row["message_id"]]],
            )
            for row in self.found
        ]
        op, held = source("src_op"), col("receipt_handle") == source("src_handle")
        new_time = timestamp_of_micros(source("src_visible_us"))
        in_flight = col("visible_at") > lit(self.now)
        as_read = col("receive_count") == source("src_count")
        claim = {**self.claim_values(new_time), "receipt_handle": source("src_handle")}
        updates = [
            ((op == lit(RETIRE)) & held, tombstone_values()),
            (
                (op == lit(CHANGE)) & held & in_flight
                & within_ceiling(new_time, col("handle_issued_at")),
                {"visible_at": new_time},
            ),
            ((op == lit(CLAIM)) & claimable(self.now, self.record.attributes) & as_read, claim),
        ]  # fmt: skip
        keys = {"shard": "src_shard", "message_id": "src_id"}
        merge = ListedMerge(ROUND_SOURCE, rows, keys, sorted(set(self.shards())), updates)
        return self.ctx.tables_for(self.record).merge_changes(self.record.location, merge)

    def by_update(self) -> Counts:
        kinds: list[tuple[Expr, dict[str, Expr]]] = []
        if self.retire:
            retiring = col("message_id").isin([ref.message_id for ref in self.retire]) & col(
                "receipt_handle"
            ).isin([ref.handle for ref in self.retire])
            kinds.append((retiring, tombstone_values()))
        if self.changes:
            extending, extended, _ = extension(self.changes, self.now)
            kinds.append((extending, extended))
        if self.found:
            claiming = col("message_id").isin(list(self.issued)) & still_claimable(
                self.found, self.now, self.record.attributes
            )
            visible_at = _by_message(self.claimed_until)
            kinds.append((claiming, self.claim_values(visible_at)))
        return self.ctx.tables_for(self.record).change(
            self.record.location,
            col("shard").isin(self.shards()) & id_range(self.ids()) & any_of([r for r, _ in kinds]),
            by_kind(kinds),
        )

    def ids(self) -> list[str]:
        return (
            [ref.message_id for ref in self.retire]
            + [ref.message_id for ref, _ in self.changes]
            + list(self.issued)
        )

    def shards(self) -> list[int]:
        return (
            [ref.shard for ref in self.retire]
            + [ref.shard for ref, _ in self.changes]
            + [row.shard for row in self.found]
        )

    def claim_values(self, visible_at: Expr) -> dict[str, Expr]:
        """What a claimed row is set to: its new handle and visible_at, one more receive."""
        return {
            **claim_values(self.now, self.now),
            "visible_at": visible_at,
            "receipt_handle": issued_handle(self.record.secret, self.token),
        }


RETIRE, CHANGE, CLAIM = "retire", "change", "claim"
# A round MERGE's source, its names apart from the table's (the rules name them by `source`).
ROUND_SOURCE: Columns = (
    ("src_op", "string", False),
    ("src_shard", "int", False),
    ("src_id", "string", False),
    ("src_handle", "string", False),
    ("src_count", "int", True),
    ("src_visible_us", "long", True),
)


def _source(
    op: str, ref: HandleRef, *, count: int | None = None, until_us: int | None = None
) -> dict[str, object]:
    return {
        "src_op": op,
        "src_shard": ref.shard,
        "src_id": ref.message_id,
        "src_handle": ref.handle,
        "src_count": count,
        "src_visible_us": until_us,
    }


def _by_message(until: dict[str, datetime]) -> Expr:
    """Each claimed row's visible_at by its id: one literal when every caller gave the same."""
    by_time: dict[datetime, list[str]] = {}
    for message_id, at in until.items():
        by_time.setdefault(at, []).append(message_id)
    [(first, _), *others] = by_time.items()
    return when(
        [(col("message_id").isin(ids), lit(at)) for at, ids in reversed(others)], lit(first)
    )


def by_kind(kinds: list[tuple[Expr, dict[str, Expr]]]) -> dict[str, Expr]:
    """One UPDATE's values for several kinds of rows: each column as the first kind whose
    condition the row meets sets it, else unchanged."""
    return {
        name: when([(condition, sets.get(name, col(name))) for condition, sets in kinds], col(name))
        for name in dict.fromkeys(name for _, sets in kinds for name in sets)
    }


def holding(ctx: QueueContext, record: QueueRecord, issued: dict[str, str]) -> list[str]:
    """Which candidates now hold the handles this claim issued (the claims that won)."""
    rows = ctx.tables_for(record).select(
        record.location,
        ["message_id"],
        col("message_id").isin(list(issued)) & col("receipt_handle").isin(list(issued.values())),
    )
    return [row.message_id for row in rows]

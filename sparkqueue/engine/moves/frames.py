"""Moves at DataFrame scale: the three steps of moves/steps.py read and copied by Spark (the redrive
job's dead-letter moves and `start_message_move` on a broker with a Spark session)."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from ...rules.expr import Expr
from ...store.dml import in_list
from ...store.native_fifo import OLDEST
from ...store.registry import QueueRecord
from ...store.spark_exprs import to_column, unless_stale_column
from ...store.spark_schema import MESSAGE_SCHEMA
from ...store.spark_tables import collect_rows, write_options
from ...store.statements import Row
from ..context import QueueContext
from ..fifo import spark as spark_fifo
from ..fifo.operations import FifoSnapshot
from ..fifo.spark import ENTRY_ORDER, home_shard, in_entry_order
from .steps import MOVE_ORDER, Marking, Moves, StepHook, arrival_values, hold_values, no_hook


class Mover(Moves):
    """Moves through Spark: marks with one MERGE, copies with one DataFrame write."""

    def __init__(self, ctx: QueueContext, on_step: StepHook = no_hook) -> None:
        super().__init__(ctx, ctx.storage, on_step)
        self._storage = ctx.storage

    def writable(self, target: QueueRecord) -> bool:
        """Whether this broker can copy rows into `target`: a FIFO table the native engine
        numbers takes them from that engine only (not through Spark Connect)."""
        return self._ctx.native is not None or not self._ctx.sequenced(target)

    def _writes_everywhere(self) -> bool:
        return self._ctx.native is not None

    def _refuse(self, target: QueueRecord) -> None:
        self._ctx.native_writer(target)  # raises UnsupportedOperation, saying why

    def _mark(self, marking: Marking) -> list[str]:
        """One MERGE from the chosen rows (the rows `RowMoves` would choose: moves.MOVE_ORDER,
        or a FIFO source's group prefixes, oldest group first), guarded as moves.guarded."""
        storage, source, condition, limit = (
            self._storage,
            marking.source,
            marking.condition,
            marking.limit,
        )
        to = F.col("moved_from") if marking.destination is None else F.lit(marking.destination)
        marker = F.concat(F.lit(marking.marker("")), to)
        t = storage.target_prefix(source.location)
        hold = {name: to_column(value) for name, value in hold_values(marking.now).items()}
        fifo = source.attributes.fifo

        def attempt() -> list[str]:
            # One pinned snapshot, so the shard list and the MERGE source agree.
            if fifo:
                snapshot = FifoSnapshot(self._ctx, source, in_spark=True)
                chosen = snapshot.deliverable(
                    now=marking.now, ok=condition, order=OLDEST, limit=limit
                )
            else:
                version = None if limit is None else storage.version(source.location)
                chosen = (
                    storage.read(source.location, version=version)
                    .where(to_column(condition))
                    .orderBy(*MOVE_ORDER)
                )
            chosen = chosen.select(
                "shard", "message_id", "receipt_handle", "receive_count", marker.alias("m")
            )
            if limit is not None and not fifo:
                chosen = chosen.limit(limit)
            groups = chosen.groupBy("shard", "m").count().collect()
            if not groups:
                return []
            same_state = F.col(f"{t}receipt_handle").eqNullSafe(F.col("s.receipt_handle")) & (
                F.col(f"{t}receive_count") == F.col("s.receive_count")
            )
            rows = in_list(f"{t}shard", [row.shard for row in groups]) & (
                F.col(f"{t}message_id") == F.col("s.message_id")
            )
            still = to_column(condition, t)
            if fifo:  # every chosen row as read, or no row at all (moves.guarded)
                handle = unless_stale_column(same_state & still, F.col("s.m"))
                storage.merge(source.location, chosen, rows).update(
                    {"receipt_handle": handle, **hold}
                ).execute()
            else:
                storage.merge(source.location, chosen, rows & same_state).update(
                    {"receipt_handle": F.col("s.m"), **hold}, still
                ).execute()
            return sorted({row.m for row in groups})

        markers = storage.transact(source.location, attempt, f"marking moves in {source.name!r}")
        self._on_step("marked", source.name)
        return markers

    def _copy(self, source: QueueRecord, marker: str, target: QueueRecord, now: datetime) -> None:
        ordered = target.attributes.fifo  # then in the source's order within each shard
        arrival = {
            name: F.lit(value).cast(MESSAGE_SCHEMA[name].dataType)
            for name, value in arrival_values(source, now).items()
        }
        rows = (
            self._ctx.read(source)
            .where(F.col("receipt_handle") == F.lit(marker))
            .withColumns(
                {
                    ENTRY_ORDER: F.col("sequence_number"),
                    **arrival,
                    "shard": home_shard(target.attributes),
                }
            )
            .select(*MESSAGE_SCHEMA.names, ENTRY_ORDER)
        )
        what = f"moving messages from {source.name!r} to {target.name!r}"
        if self._ctx.sequenced(target):  # numbered by the native engine, once per marker
            native = self._ctx.native_writer(target)
            spark_fifo.append_frame(native, target, rows, what, app_id=marker)
            return
        rows = in_entry_order(rows) if ordered else rows.drop(ENTRY_ORDER)
        self._storage.append(target.location, rows, what, options=write_options(marker))

    def _rows(self, source: QueueRecord, columns: list[str], rule: Expr) -> list[Row]:
        return collect_rows(self._storage.read(source.location).where(to_column(rule)), columns)

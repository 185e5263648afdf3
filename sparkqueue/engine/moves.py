"""Crash-safe moves of messages between two queue tables, which Delta cannot commit together.

A move is three commits, each safe to repeat:

1. mark: one MERGE stamps the chosen rows of the source with a marker naming the move and its
   destination (`moving:<token>:<queue>`). The marker replaces the receipt handle, so old handles
   are void, and hides the rows from receivers until the move ends.
2. copy: the marked rows are appended to the destination as an idempotent Delta write whose
   `txnAppId` is the marker: if that write already committed, Delta skips it (a FIFO table the
   native engine numbers takes them through its own append, with the marker as its app id).
3. drop: the marked rows are deleted from the source.

A crash between any two commits leaves markers in the source. `finish_pending`, which runs before
every redrive pass and every message move, repeats steps 2 and 3 for them; step 2 is a no-op when
it had committed, so every message ends up exactly once, in the source or in the destination.
Delta remembers write ids for `delta.setTransactionRetentionDuration` (7 days on queue tables),
far longer than the minute between redrive passes that finish interrupted moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..limits import MOVE_HOLD
from ..rules import handles
from ..rules.expr import Expr, col, lit, null
from ..store.dml import in_list
from ..store.registry import QueueRecord
from ..store.schema import QUEUE_WRITE_OPTIONS
from ..store.spark_exprs import to_column
from ..store.spark_schema import MESSAGE_SCHEMA
from . import fifo
from .conditions import MOVE_MARKER_PREFIX, alive, being_moved, due, retire
from .context import QueueContext
from .fifo import ENTRY_ORDER, home_shard, in_entry_order

log = logging.getLogger(__name__)
COPY_TXN_VERSION = 1  # each marker is its own txnAppId, written once

StepHook = Callable[[str, str], None]


def no_hook(step: str, queue: str) -> None:
    """The production step hook: tests replace it to inject crashes between commits."""


class Mover:
    """Moves messages from one queue's table to others, exactly once even across crashes."""

    def __init__(self, ctx: QueueContext, on_step: StepHook = no_hook) -> None:
        self._ctx = ctx
        self._storage = ctx.storage
        self._on_step = on_step

    def move(
        self,
        source: QueueRecord,
        condition: Expr,
        destination: Column,
        now: datetime,
        limit: int | None = None,
    ) -> int:
        """Moves the rows meeting `condition` to the queue named by `destination`; returns how many."""
        token = handles.new_token()
        markers = self._mark(source, condition, destination, now, token, limit)
        return sum(self._finish(source, marker, now) for marker in markers)

    def move_back(
        self, source: QueueRecord, destination: str | None, now: datetime, limit: int | None
    ) -> int:
        """Moves visible messages (never ones held by a consumer) to `destination`, or each to
        the queue it came from; finishes interrupted moves first."""
        self.finish_pending(source, now)
        attrs = source.attributes
        if self._ctx.native is None:  # refuse before marking what could not be copied
            self._check_writable(source, destination)
        return self.move(
            source,
            due(now) & alive(now, attrs) & ~being_moved(),
            F.col("moved_from") if destination is None else F.lit(destination),
            now,
            limit,
        )

    def _check_writable(self, source: QueueRecord, destination: str | None) -> None:
        names = (
            [destination]
            if destination is not None
            else [
                row.moved_from
                for row in self._storage.read(source.location)
                .where(F.col("moved_from").isNotNull())
                .select("moved_from")
                .distinct()
                .collect()
            ]
        )
        for name in names:
            target = self._ctx.registry.get(name)
            if target is not None and not self.writable(target):
                self._ctx.native_writer(target)  # raises UnsupportedOperation, saying why

    def finish_pending(self, source: QueueRecord, now: datetime) -> int:
        """Completes moves that an earlier, interrupted run left marked in `source`."""
        rows = (
            self._storage.read(source.location)
            .where(to_column(being_moved()))
            .select("receipt_handle")
            .distinct()
            .collect()
        )
        return sum(self._finish(source, row.receipt_handle, now) for row in rows)

    # -- the three steps ------------------------------------------------------------------------

    def _mark(
        self,
        source: QueueRecord,
        condition: Expr,
        destination: Column,
        now: datetime,
        token: str,
        limit: int | None,
    ) -> list[str]:
        storage = self._storage
        marker = F.concat(F.lit(f"{MOVE_MARKER_PREFIX}{token}:"), destination)

        def attempt() -> list[str]:
            # With a limit, one pinned snapshot, so the shard list and the MERGE source agree.
            version = None if limit is None else storage.version(source.location)
            chosen = (
                storage.read(source.location, version=version)
                .where(to_column(condition) & destination.isNotNull())
                .select("shard", "message_id", "receipt_handle", "receive_count", marker.alias("m"))
                .orderBy("message_id")
            )
            if limit is not None:
                chosen = chosen.limit(limit)
            groups = chosen.groupBy("shard", "m").count().collect()
            if not groups:
                return []
            t = storage.target_prefix(source.location)
            same_state = F.col(f"{t}receipt_handle").eqNullSafe(F.col("s.receipt_handle")) & (
                F.col(f"{t}receive_count") == F.col("s.receive_count")
            )
            rows = in_list(f"{t}shard", [row.shard for row in groups]) & (
                F.col(f"{t}message_id") == F.col("s.message_id")
            )
            storage.merge(source.location, chosen, rows & same_state).update(
                {
                    "receipt_handle": F.col("s.m"),
                    "visible_at": F.lit(now + MOVE_HOLD),
                    "handle_issued_at": F.lit(now),
                },
                to_column(condition, t),
            ).execute()
            return sorted({row.m for row in groups})

        markers = storage.transact(source.location, attempt, f"marking moves in {source.name!r}")
        self._on_step("marked", source.name)
        return markers

    def writable(self, target: QueueRecord) -> bool:
        """Whether this broker can copy rows into `target`: a FIFO table the native engine
        numbers takes them from that engine only (not through Spark Connect)."""
        return self._ctx.native is not None or not self._ctx.sequenced(target)

    def _finish(self, source: QueueRecord, marker: str, now: datetime) -> int:
        """Steps 2 and 3 for one marker; both are no-ops when already done. A destination this
        broker cannot write keeps the marked rows for a broker that can (logged, never raised:
        the rest of a redrive pass goes on)."""
        target_name = marker.split(":", 2)[2]
        target = self._ctx.registry.get(target_name)
        if target is None:
            self._unmark(source, marker, now)
            return 0
        if not self.writable(target):
            log.warning("moves to %r wait for a broker with the native engine", target_name)
            return 0
        self._copy(source, marker, target, now)
        self._on_step("copied", source.name)
        moved = self._drop(source, marker)
        self._on_step("dropped", source.name)
        return moved

    def _copy(self, source: QueueRecord, marker: str, target: QueueRecord, now: datetime) -> None:
        ordered = target.attributes.fifo  # then in the source's order within each shard
        rows = (
            self._ctx.read(source)
            .where(F.col("receipt_handle") == F.lit(marker))
            .withColumns(
                {
                    ENTRY_ORDER: F.col("sequence_number"),
                    "sequence_number": F.lit(None).cast("long"),
                    "shard": home_shard(target.attributes),
                    "visible_at": F.lit(now),
                    "receipt_handle": F.lit(None).cast("string"),
                    "receive_count": F.lit(0),
                    "first_received_at": F.lit(None).cast("timestamp"),
                    "handle_issued_at": F.lit(None).cast("timestamp"),
                    "moved_from": F.lit(source.name),
                }
            )
            .select(*MESSAGE_SCHEMA.names, ENTRY_ORDER)
        )
        what = f"moving messages from {source.name!r} to {target.name!r}"
        if self._ctx.sequenced(target):  # numbered by the native engine, once per marker
            native = self._ctx.native_writer(target)
            fifo.append_frame(native, target, rows, what, app_id=marker)
            return
        rows = in_entry_order(rows) if ordered else rows.drop(ENTRY_ORDER)
        self._storage.append(
            target.location,
            rows,
            what,
            options={
                **QUEUE_WRITE_OPTIONS,
                "txnAppId": marker,
                "txnVersion": str(COPY_TXN_VERSION),
            },
        )

    def _drop(self, source: QueueRecord, marker: str) -> int:
        return self._storage.change_where(
            source.location,
            col("receipt_handle") == marker,
            f"finishing moves from {source.name!r}",
            values=retire(source.attributes),
        )

    def _unmark(self, source: QueueRecord, marker: str, now: datetime) -> None:
        """The destination is gone: the rows stay in the source, visible again."""
        self._storage.change_where(
            source.location,
            col("receipt_handle") == marker,
            f"cancelling moves from {source.name!r}",
            values={
                "receipt_handle": null("string"),
                "visible_at": lit(now),
                "handle_issued_at": null("timestamp"),
            },
        )

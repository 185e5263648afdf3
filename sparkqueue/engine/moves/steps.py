"""Crash-safe moves of messages between two queue tables, which Delta cannot commit together.

A move is three commits, each safe to repeat:

1. mark: the chosen rows of the source are stamped with a marker naming the move and its
   destination (`moving:<token>:<queue>`). The marker replaces the receipt handle, so old handles
   are void, and hides the rows from receivers until the move ends.
2. copy: the marked rows are appended to the destination as an idempotent Delta write whose app
   id is the marker: if that write already committed, it is skipped (a FIFO table the native
   engine numbers takes them through its own append, with the marker as its app id).
3. drop: the marked rows are deleted from the source.

A crash between any two commits leaves markers in the source. `finish_pending`, which runs before
every redrive pass and every message move, repeats steps 2 and 3 for them; step 2 is a no-op when
it had committed, so every message ends up exactly once, in the source or in the destination.
Delta remembers write ids for `delta.setTransactionRetentionDuration` (7 days on queue tables),
far longer than the minute between redrive passes that finish interrupted moves.

`Moves` holds the steps' order and what they write; how rows are read and copied is either
Spark's, at DataFrame scale (moves/frames.py), or `RowMoves` below: rows at hand through the
native engine, for brokers without Spark.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ...errors import QueueDoesNotExist, UnsupportedOperation
from ...limits import MAX_RECEIVE_DF, MOVE_HOLD
from ...rules import handles
from ...rules.expr import Expr, col, lit, null
from ...rules.handles import MOVE_MARKER_PREFIX
from ...store.native_fifo import OLDEST, append_in_sequence
from ...store.native_fifo import home_shard as group_shard
from ...store.registry import QueueRecord
from ...store.schema import MESSAGE_COLUMNS
from ...store.statements import Row
from ..conditions import alive, being_moved, due, is_message, retire
from ..context import QueueContext
from ..fifo.operations import FifoSnapshot
from ..messages.claim import as_read, unless_stale

log = logging.getLogger(__name__)

StepHook = Callable[[str, str], None]
# The order a standard queue's messages are chosen to move in, by either engine (oldest first:
# ids sort by send time); a FIFO queue's go by group prefixes, oldest group first (OLDEST).
MOVE_ORDER = ("message_id",)


def no_hook(step: str, queue: str) -> None:
    """The production step hook: tests replace it to inject crashes between commits."""


class ChangesWhere(Protocol):
    def change_where(
        self, address: str, rule: Expr, what: str, *, values: dict[str, Expr] | None = None
    ) -> int: ...


@dataclass(frozen=True)
class Marking:
    """Step 1 of one move: which rows of `source` (`condition`, at most `limit`, by message id)
    go where (`destination`, or None: each to the queue it came from), under markers
    `moving:<token>:<queue>`."""

    source: QueueRecord
    condition: Expr
    destination: str | None
    now: datetime
    token: str
    limit: int | None

    def marker(self, destination: str) -> str:
        return f"{MOVE_MARKER_PREFIX}{self.token}:{destination}"


def hold_values(now: datetime) -> dict[str, Expr]:
    """What step 1 writes besides the marker (which takes the receipt handle's place): the row
    hidden for MOVE_HOLD, from now."""
    return {"visible_at": lit(now + MOVE_HOLD), "handle_issued_at": lit(now)}


def arrival_values(source: QueueRecord, now: datetime) -> dict[str, Any]:
    """What a copied row starts with in its destination: visible now, never received, from
    `source` (step 2; its shard is the destination's to choose)."""
    return {
        "sequence_number": None,
        "visible_at": now,
        "receipt_handle": None,
        "receive_count": 0,
        "first_received_at": None,
        "handle_issued_at": None,
        "moved_from": source.name,
    }


def guarded(
    source: QueueRecord, chosen: list[Row], condition: Expr, marker: Expr
) -> tuple[Expr, Expr]:
    """A mark's new receipt handle and the rows it applies to beyond their ids: on a standard
    queue the chosen rows that still meet `condition`; on a FIFO queue every chosen row, and
    the whole statement fails if one changed since it was read, as a FIFO claim does (a group
    is never half-moved, nor moved while a receiver holds its head)."""
    if source.attributes.fifo:
        return unless_stale(as_read(chosen) & condition, marker), lit(True)
    return marker, condition


class Moves:
    """Moves messages from one queue's table to others, exactly once even across crashes."""

    chunk: int | None = None  # rows marked and copied at a time (None: all at once)

    def __init__(self, ctx: QueueContext, store: ChangesWhere, on_step: StepHook = no_hook) -> None:
        self._ctx = ctx
        self._store = store
        self._on_step = on_step

    def move(
        self,
        source: QueueRecord,
        condition: Expr,
        destination: str | None,
        now: datetime,
        limit: int | None = None,
    ) -> int:
        """Moves the rows meeting `condition` to the queue `destination` (None: each to the
        queue it came from); returns how many. An engine with a `chunk` moves that many rows at
        a time, each chunk its own three steps."""
        if destination is None:  # a message sent to this queue itself has nowhere to go back to
            condition = condition & col("moved_from").is_not_null()
        moved = 0
        while limit is None or moved < limit:
            left = None if limit is None else limit - moved
            size = left if self.chunk is None else min(self.chunk, left or self.chunk)
            marking = Marking(source, condition, destination, now, handles.new_token(), size)
            done = sum(self._finish(source, marker, now) for marker in self._mark(marking))
            moved += done
            if size is None or done < size:
                break
        return moved

    def move_back(
        self,
        source: QueueRecord,
        destination: str | None,
        now: datetime,
        limit: int | None,
        message_ids: Sequence[str] | None = None,
    ) -> int:
        """Moves visible messages (never ones held by a consumer; only `message_ids` if given)
        to `destination`, or each to the queue it came from; finishes interrupted moves first."""
        self.finish_pending(source, now)
        if not self._writes_everywhere():  # refuse before marking what could not be copied
            names = [destination] if destination is not None else self._origins(source)
            for name in names:
                target = self._ctx.registry.get(name)
                if target is not None and not self.writable(target):
                    self._refuse(target)
        attrs = source.attributes
        condition = due(now) & alive(now, attrs) & ~being_moved()
        if message_ids is not None:
            condition = condition & col("message_id").isin(list(message_ids))
        return self.move(source, condition, destination, now, limit)

    def finish_pending(self, source: QueueRecord, now: datetime) -> int:
        """Completes moves that an earlier, interrupted run left marked in `source`."""
        return sum(self._finish(source, marker, now) for marker in self._pending(source))

    def _finish(self, source: QueueRecord, marker: str, now: datetime) -> int:
        """Steps 2 and 3 for one marker; both are no-ops when already done. A destination this
        broker cannot write keeps the marked rows for a broker that can (logged, never raised:
        the rest of a redrive pass goes on); one that is gone, or whose table is gone (a
        deletion under way, or one a crash cut short), gives them back to the source."""
        target_name = marker.split(":", 2)[2]
        target = self._ctx.registry.get(target_name)
        if target is None:
            self._unmark(source, marker, now)
            return 0
        if not self.writable(target):
            log.warning("moves to %r wait for a broker that can write it", target_name)
            return 0
        try:
            self._copy(source, marker, target, now)
        except QueueDoesNotExist:
            if self._ctx.tables.exists(target.location):
                raise  # the source is the one gone: the caller says so
            self._unmark(source, marker, now)
            return 0
        self._on_step("copied", source.name)
        moved = self._store.change_where(
            source.location,
            col("receipt_handle") == marker,
            f"finishing moves from {source.name!r}",
            values=retire(source.attributes),
        )
        self._on_step("dropped", source.name)
        return moved

    def _unmark(self, source: QueueRecord, marker: str, now: datetime) -> None:
        """The destination is gone: the rows stay in the source, visible again; but a row whose
        message has come back meanwhile (a move back landed beside it) goes, so that the message
        is in the source once."""
        marked = col("receipt_handle") == marker
        ids = [row.message_id for row in self._rows(source, ["message_id"], marked)]
        back = is_message() & ~being_moved() & col("message_id").isin(ids)
        returned = sorted({row.message_id for row in self._rows(source, ["message_id"], back)})
        what = f"cancelling moves from {source.name!r}"
        if returned:
            rows = marked & col("message_id").isin(returned)
            self._store.change_where(source.location, rows, what, values=retire(source.attributes))
        self._store.change_where(
            source.location,
            marked,
            what,
            values={
                "receipt_handle": null("string"),
                "visible_at": lit(now),
                "handle_issued_at": null("timestamp"),
            },
        )

    def _pending(self, source: QueueRecord) -> list[str]:
        """The markers of moves an interrupted run left in `source`."""
        return sorted(
            {row.receipt_handle for row in self._rows(source, ["receipt_handle"], being_moved())}
        )

    def _origins(self, source: QueueRecord) -> list[str]:
        """The queues `source`'s messages were moved from."""
        found = col("moved_from").is_not_null()
        return sorted({row.moved_from for row in self._rows(source, ["moved_from"], found)})

    # -- how rows are read and copied: each engine's ------------------------------------------

    def writable(self, target: QueueRecord) -> bool:
        raise NotImplementedError

    def _writes_everywhere(self) -> bool:
        """Whether every queue is `writable` (then move_back checks none)."""
        return False

    def _refuse(self, target: QueueRecord) -> None:
        raise NotImplementedError

    def _mark(self, marking: Marking) -> list[str]:
        """Step 1, as its own transaction; the markers it wrote."""
        raise NotImplementedError

    def _copy(self, source: QueueRecord, marker: str, target: QueueRecord, now: datetime) -> None:
        raise NotImplementedError

    def _rows(self, source: QueueRecord, columns: list[str], rule: Expr) -> list[Row]:
        """The `source` rows meeting `rule`, with `columns`."""
        raise NotImplementedError


class RowMoves(Moves):
    """Moves with the rows at hand, through the native engine (a broker without Spark): it
    writes standard tables and the FIFO tables it numbers, never Spark's row-tracking ones."""

    chunk = 1_000  # no copy holds more rows than this in memory

    def __init__(self, ctx: QueueContext, on_step: StepHook = no_hook) -> None:
        native = ctx.native
        if native is None:
            raise UnsupportedOperation("moving messages needs Spark or the native engine")
        super().__init__(ctx, native, on_step)
        self._native = native

    def writable(self, target: QueueRecord) -> bool:
        return not self._ctx.spark_only(target)

    def _refuse(self, target: QueueRecord) -> None:
        self._ctx.tables_for(target)  # raises UnsupportedOperation, saying why

    def _mark(self, marking: Marking) -> list[str]:
        """One UPDATE per destination, each under a marker of its own: a retry after a conflict
        between two of them never reuses a marker that another finisher may have completed
        already (a copy under it would be skipped as done, and its rows dropped). A FIFO
        source's UPDATE fails whole if any chosen row changed since it was read (`guarded`)."""
        source, condition, now = marking.source, marking.condition, marking.now
        if not self.writable(source):
            self._refuse(source)
        marked: dict[str, int] = {}  # kept across retries: a committed mark stays committed

        def attempt() -> None:
            wanted = None if marking.limit is None else marking.limit - sum(marked.values())
            if wanted is not None and wanted <= 0:
                return
            by_target: dict[str, list[Any]] = {}
            for row in self._chosen(marking, wanted):
                name = row.moved_from if marking.destination is None else marking.destination
                if name is not None:
                    by_target.setdefault(name, []).append(row)
            for name, rows in sorted(by_target.items()):
                marker = f"{MOVE_MARKER_PREFIX}{handles.new_token()}:{name}"
                ids = col("message_id").isin([row.message_id for row in rows])
                shards = col("shard").isin(sorted({row.shard for row in rows}))
                handle, rule = guarded(source, rows, condition, lit(marker))
                values = {"receipt_handle": handle, **hold_values(now)}
                marked[marker] = self._native.change(
                    source.location, shards & ids & rule, values
                ).changed

        self._native.transact(source.location, attempt, f"marking moves in {source.name!r}")
        self._on_step("marked", source.name)
        return [marker for marker, rows in marked.items() if rows]  # in marking order

    def _chosen(self, marking: Marking, wanted: int | None) -> list[Row]:
        """The rows to mark: a FIFO source's whole group prefixes, oldest group first; a
        standard source's oldest rows (the same rows Spark's moves choose)."""
        source, columns = marking.source, ["shard", "message_id", "moved_from", "receive_count"]
        if source.attributes.fifo:
            return FifoSnapshot(self._ctx, source).prefixes(
                columns,
                now=marking.now,
                ok=marking.condition,
                order=OLDEST,
                limit=MAX_RECEIVE_DF if wanted is None else wanted,
            )
        return self._native.select(
            source.location, columns, marking.condition, order_by=MOVE_ORDER, limit=wanted
        )

    def _copy(self, source: QueueRecord, marker: str, target: QueueRecord, now: datetime) -> None:
        names = [name for name, _, _ in MESSAGE_COLUMNS]
        rows = self._native.select(
            source.location,
            names,
            col("receipt_handle") == marker,
            order_by=["sequence_number", "message_id"],  # a FIFO source's order, kept
        )
        if not rows:
            return  # copied and dropped before
        what = f"moving messages from {source.name!r} to {target.name!r}"
        arrival = arrival_values(source, now)
        shards = target.attributes.shards
        if self._ctx.sequenced(target):  # each in its group's shard, numbered on the way in
            placed = [
                {**row, **arrival, "shard": group_shard(row["group_id"], shards)} for row in rows
            ]
            append_in_sequence(
                self._native, target.location, MESSAGE_COLUMNS, placed, what, app_id=marker
            )
            return
        shard = random.randrange(shards)  # one file, as a send's
        placed = [{**row, **arrival, "shard": shard} for row in rows]
        self._native.append_rows(target.location, MESSAGE_COLUMNS, placed, what, app_id=marker)

    def _rows(self, source: QueueRecord, columns: list[str], rule: Expr) -> list[Row]:
        return self._native.select(source.location, columns, rule)

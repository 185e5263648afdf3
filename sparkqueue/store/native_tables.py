"""The native engine: a broker's tables read and committed by delta-rs, with no JVM.

Reads are DataFusion queries over the table's latest snapshot; UPDATE, DELETE and MERGE are
delta-rs's own, whose commits are checked for conflicts against every commit since their
snapshot (Spark's included: each engine reads the other's as plain add/remove actions). On a
local root every transaction also holds the table's commit lock, exactly as Spark's do (see
locking.py), so the two engines never write one log version twice. On object storage a commit
is a conditional put of the next log version, which the store itself grants to one writer only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import DeltaProtocolError, TableNotFoundError

from ..errors import QueueDoesNotExist, TransactionConflict
from ..rules.expr import Expr, Field, col
from .counts import Counts
from .locking import NATIVE, commit_lock
from .native_arrow import arrow_table, read_rows
from .native_commits import (
    NO_HOOKS,
    after_commit,
    applied,
    applying,
    commit_once,
    metric,
)
from .native_history import LogTrimmed, RowState, row_states
from .native_leases import NativeLeases
from .native_lifecycle import NativeLifecycle
from .native_pool import LocalEntries, LogEntries, OpenTables, StoredEntries
from .native_process import check_process
from .native_sql import aggregate_list, quote_name, select_statement, to_sql
from .native_upkeep import NativeUpkeep
from .schema import Columns
from .statements import APP_TXN_VERSION, MESSAGE_KEY, ListedMerge, Row
from .tables import PathLayout
from .transactions import ConflictCounter, RetryPolicy, run_transaction

T = TypeVar("T")
log = logging.getLogger(__name__)
_SOURCE = "s"  # a MERGE's source alias; the target's is "t"
HISTORY_READ_ATTEMPTS = 3  # a trim lands once a pass (a minute): a third read finds it done


class NativeTables(NativeLifecycle, NativeUpkeep, NativeLeases):
    """The `Tables` of a broker on a path root, served by delta-rs."""

    engine = "native"
    counts_known = True

    def __init__(
        self,
        layout: PathLayout,
        policy: RetryPolicy,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self._layout = layout
        self._policy = policy
        # delta-rs's own keys (e.g. AWS_ENDPOINT_URL); what they leave out, it reads from the
        # environment, as the AWS, Google and Azure SDKs do
        self._options = dict(storage_options) if storage_options else None
        self._conflicts = ConflictCounter()
        self._known: set[str] = set()
        self._known_lock = threading.Lock()
        self._sequenced: dict[str, bool] = {}
        entries: LogEntries = (
            StoredEntries(self._uri, self._options)
            if layout.object_store
            else LocalEntries(layout.folder)
        )
        self._kept = OpenTables(self.open, entries)

    @property
    def layout(self) -> PathLayout:
        return self._layout

    @property
    def conflicts(self) -> ConflictCounter:
        return self._conflicts

    # -- reading ----------------------------------------------------------------------------------

    def open(self, address: str, version: int | None = None) -> DeltaTable:
        """The table's latest snapshot (or the one at `version`); QueueDoesNotExist once it was
        dropped (a writer that looked its queue up before the delete must not create it anew)."""
        check_process()
        try:
            return DeltaTable(self._uri(address), version=version, storage_options=self._options)
        except TableNotFoundError:
            raise QueueDoesNotExist(
                f"the table {address} does not exist: its queue was deleted"
            ) from None

    def reopener(self, address: str) -> Callable[[], DeltaTable] | None:
        """How `commit_once` reads the log after a lost answer: on object storage only."""
        return (lambda: self.open(address)) if self._layout.object_store else None

    def _uri(self, address: str) -> str:
        folder = self._layout.folder(address)
        return folder if folder is not None else address

    def query(self, address: str, statement: str, *, at: DeltaTable | None = None) -> list[Row]:
        """Runs a DataFusion query over the table as `t` (statement text from native_sql.py's
        renderings only), on its latest snapshot or the one `at` holds."""
        if at is not None:
            return _rows(QueryBuilder().register("t", at).execute(statement))
        with self._kept.lent(address) as table:  # read to the end before another takes it
            return _rows(QueryBuilder().register("t", table).execute(statement))

    def arrow(self, address: str, statement: str, *, at: DeltaTable) -> pa.Table:
        """`query`'s result as one Arrow table, for readers that hand it on whole (Spark's)."""
        return self.batches(address, statement, at=at).read_all()

    def batches(self, address: str, statement: str, *, at: DeltaTable) -> pa.RecordBatchReader:
        """`query`'s result batch by batch, for writers that pass it on (a stage's append)."""
        return pa.RecordBatchReader.from_stream(QueryBuilder().register("t", at).execute(statement))

    def select(
        self,
        address: str,
        columns: Sequence[Field],
        where: Expr | None = None,
        *,
        order_by: Sequence[str | Expr] = (),
        limit: int | None = None,
        at: DeltaTable | None = None,
        descending: bool = False,
    ) -> list[Row]:
        statement = select_statement(columns, where, order_by, limit, descending)
        return self.query(address, statement, at=at)

    def snapshot(self, address: str) -> contextlib.AbstractContextManager[DeltaTable]:
        return self._kept.lent(address)  # kept again after the reads

    def aggregate(
        self,
        address: str,
        counts: dict[str, Expr],
        least: dict[str, Expr],
        *,
        at: DeltaTable | None = None,
    ) -> Row:
        return self.query(address, f"SELECT {aggregate_list(counts, least)} FROM t", at=at)[0]

    def aggregate_by(
        self, address: str, by: str, counts: dict[str, Expr], least: dict[str, Expr]
    ) -> dict[Any, Row]:
        name = quote_name(by)
        statement = f"SELECT {name}, {aggregate_list(counts, least)} FROM t GROUP BY {name}"
        return {row.pop(by): row for row in self.query(address, statement)}

    def is_sequenced(self, address: str) -> bool:
        """Whether a FIFO table numbers its messages in a `sequence_number` column, written by
        this engine (native_fifo.py), rather than by Delta row tracking, which is Spark's:
        delta-rs refuses to write such tables. A table keeps its kind for life."""
        known = self._sequenced.get(address)
        if known is None:
            try:
                features = self.open(address).protocol().writer_features or []
            except QueueDoesNotExist:
                return True  # not (yet) there: the native engine would create it
            except DeltaProtocolError:  # a table delta-rs cannot even read is Spark's
                features = ["rowTracking"]
            known = self._sequenced[address] = "rowTracking" not in features
        return known

    # -- committing -------------------------------------------------------------------------------

    def transact(
        self, address: str, action: Callable[[], T], what: str, *, alone: bool = False
    ) -> T:
        check_process()
        on_store = address if self._layout.object_store else None  # this process's turns there
        return run_transaction(
            action,
            lock=commit_lock(self._layout.lock_file(address), NATIVE, alone=alone, table=on_store),
            policy=self._policy,
            counter=self._conflicts,
            what=what,
        )

    def change(
        self,
        address: str,
        rows: Expr,
        values: dict[str, Expr] | None = None,
        *,
        key: tuple[str, ...] = MESSAGE_KEY,
    ) -> Counts:
        with self._kept.lent(address) as table:
            return self._change(address, table, rows, values)

    def _change(
        self, address: str, table: DeltaTable, rows: Expr, values: dict[str, Expr] | None
    ) -> Counts:
        before = table.version()
        if values is None:
            committed = commit_once(
                table,
                self.reopener(address),
                lambda mark: table.delete(
                    to_sql(rows),
                    post_commithook_properties=NO_HOOKS,
                    commit_properties=applying(mark),
                ),
            )
            counts = Counts(known=True, deleted=metric(committed.metrics, "num_deleted_rows"))
        else:
            updates = {quote_name(name): to_sql(value) for name, value in values.items()}
            committed = commit_once(
                table,
                self.reopener(address),
                lambda mark: table.update(
                    updates=updates,
                    predicate=to_sql(rows),
                    post_commithook_properties=NO_HOOKS,
                    commit_properties=applying(mark),
                ),
            )
            counts = Counts(known=True, updated=metric(committed.metrics, "num_updated_rows"))
        after_commit(table, before)
        return dataclasses.replace(counts, version=committed.version)

    def change_where(
        self, address: str, rule: Expr, what: str, *, values: dict[str, Expr] | None = None
    ) -> int:
        def attempt() -> int:
            statement = f"SELECT DISTINCT shard FROM t WHERE {to_sql(rule)}"
            shards = [row.shard for row in self.query(address, statement)]
            if not shards:
                return 0
            return self.change(address, col("shard").isin(shards) & rule, values).changed

        return self.transact(address, attempt, what)

    def append_rows(
        self,
        address: str,
        columns: Columns,
        rows: list[dict[str, Any]],
        what: str,
        *,
        app_id: str | None = None,
        app_version: int = APP_TXN_VERSION,
        within: Expr | None = None,
    ) -> None:
        frame = arrow_table(rows, columns)
        self.append_arrow(
            address, lambda: frame, what, app_id=app_id, app_version=app_version, within=within
        )

    def append_arrow(
        self,
        address: str,
        data: Callable[[], pa.Table | pa.RecordBatchReader],
        what: str,
        *,
        app_id: str | None = None,
        app_version: int = APP_TXN_VERSION,
        within: Expr | None = None,
    ) -> None:
        """With `within` (a condition every appended row meets) delta-rs checks the commit
        against the files that may hold such rows alone; without it, an append counts as a read
        of the whole table, and any removal of data committed while it was written (a claim, a
        delete) fails it, to be written again: statements.py `append_rows`."""
        bounds = {} if within is None else {"predicate": to_sql(within)}

        def append() -> None:
            with self._kept.lent(address) as table:
                if app_id is not None and applied(table, app_id, app_version):
                    return
                before = table.version()
                commit_once(
                    table,
                    self.reopener(address),
                    lambda mark: write_deltalake(
                        table,
                        data(),  # afresh on a retry: a reader is read once
                        mode="append",
                        **bounds,
                        commit_properties=applying(mark, app_id, version=app_version),
                        post_commithook_properties=NO_HOOKS,
                    ),
                )
                after_commit(table, before)

        self.transact(address, append, what)

    def insert_absent(
        self, address: str, columns: Columns, key: str, row: dict[str, Any]
    ) -> Counts:
        table = self.open(address)
        source = arrow_table([row], columns)
        on = f"t.{quote_name(key)} = {_SOURCE}.{quote_name(key)}"
        before = table.version()
        committed = commit_once(
            table,
            self.reopener(address),
            lambda mark: (
                table.merge(
                    source,
                    on,
                    source_alias=_SOURCE,
                    target_alias="t",
                    post_commithook_properties=NO_HOOKS,
                    commit_properties=applying(mark),
                )
                .when_not_matched_insert_all()
                .execute()
            ),
        )
        after_commit(table, before)
        return Counts(known=True, inserted=metric(committed.metrics, "num_target_rows_inserted"))

    def merge_changes(self, address: str, merge: ListedMerge) -> Counts:
        """Not streamed: then delta-rs reads the source's key ranges into the commit's read
        predicate, so a concurrent append of newer ids to the same shards does not conflict with
        it (streamed, only the shards are; the source is at most a round)."""
        frame = arrow_table(merge.rows, merge.source)
        on = [f"t.shard IN ({', '.join(str(int(shard)) for shard in merge.shards)})"]
        on += [f"t.{quote_name(t)} = {_SOURCE}.{quote_name(s)}" for t, s in merge.keys.items()]

        def write(mark: str) -> dict[str, Any]:
            merger = table.merge(
                frame,
                " AND ".join(on),
                source_alias=_SOURCE,
                target_alias="t",
                streamed_exec=False,
                post_commithook_properties=NO_HOOKS,
                commit_properties=applying(mark),
            )
            for condition, values in merge.updates:
                sets = {quote_name(name): to_sql(value) for name, value in values.items()}
                merger = merger.when_matched_update(sets, predicate=to_sql(condition))
            return merger.execute()

        with self._kept.lent(address) as table:
            before = table.version()
            committed = commit_once(table, self.reopener(address), write)
            after_commit(table, before)
        return Counts(known=True, updated=metric(committed.metrics, "num_target_rows_updated"))

    def row_states(self, address: str, message_id: str) -> list[RowState]:
        """One message's row through the table's kept versions (native_history.py), read again
        when the log's oldest end was trimmed under the reading."""
        for _ in range(HISTORY_READ_ATTEMPTS):
            with contextlib.suppress(LogTrimmed):
                return list(row_states(self._uri(address), message_id, self._options))
        raise TransactionConflict(
            f"the log of {address} was trimmed under {HISTORY_READ_ATTEMPTS} readings in a row;"
            " read the history again"
        )


def _rows(reader: Any) -> list[Row]:
    """A query's result as rows (not pa.table(reader): it imports pandas, half a second of a
    CLI command's start)."""
    found = pa.RecordBatchReader.from_stream(reader).read_all()
    return read_rows(found)

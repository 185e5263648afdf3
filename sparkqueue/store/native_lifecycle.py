"""A native table's life: created (or upgraded with the columns an older one lacks) once per
process, and dropped whole, folder and log, under its commit lock on a local root."""

from __future__ import annotations

import contextlib
import functools
import shutil
import threading
from collections.abc import Callable

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from ..errors import QueueDoesNotExist, UnsupportedOperation
from .logtrim import clear_unfinished_log
from .native_arrow import arrow_schema, delta_field
from .native_commits import asked_again
from .native_pool import OpenTables
from .schema import Columns
from .tables import PathLayout
from .transactions import ConflictCounter, RetryPolicy, run_transaction


class NativeLifecycle:
    """Creating, upgrading and dropping NativeTables' tables (mixed into it: it opens and
    commits through the table's own `open` and `transact`)."""

    _layout: PathLayout
    _options: dict[str, str] | None
    _policy: RetryPolicy
    _conflicts: ConflictCounter
    _known: set[str]
    _known_lock: threading.Lock
    _sequenced: dict[str, bool]
    _kept: OpenTables
    open: Callable[..., DeltaTable]
    _uri: Callable[[str], str]
    transact: Callable[..., object]

    def exists(self, address: str) -> bool:
        try:
            self.open(address)
        except QueueDoesNotExist:
            return False
        return True

    def ensure_table(
        self,
        address: str,
        columns: Columns,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        if address in self._known:
            return
        folder = self._layout.folder(address)

        def create() -> None:
            if folder is not None:  # a creation killed before its first commit left a stub
                clear_unfinished_log(folder)
            try:
                DeltaTable.create(
                    self._uri(address),
                    arrow_schema(columns),
                    partition_by=list(partition_by) or None,
                    mode="ignore",  # so a creation whose answer was lost is asked again
                    configuration=properties,
                    storage_options=self._options,
                )
            except Exception as error:
                raise asked_again(error) from error
            self._add_missing(address, columns)

        self.transact(address, create, f"creating the table {address}", alone=True)
        self._remember(address)

    def upgrade_table(self, address: str, columns: Columns) -> bool:
        if address in self._known:
            return True
        if not self.exists(address):
            return False
        self.transact(address, lambda: self._add_missing(address, columns), f"upgrading {address}")
        self._remember(address)
        return True

    def _add_missing(self, address: str, columns: Columns) -> None:
        """Adds the nullable columns of `columns` an older table lacks."""
        table = self.open(address)
        have = set(pa.schema(table.schema().to_arrow()).names)
        missing = [c for c in columns if c[0] not in have and c[2]]
        if missing:
            features = table.protocol().writer_features or []
            if "rowTracking" in features:  # a FIFO table: only Spark writes it
                raise UnsupportedOperation(
                    f"{address} was created by an older version and lacks columns; open it once"
                    " with a Spark session (Broker(spark, root)) to add them"
                )
            fields = arrow_schema(tuple(missing))
            table.alter.add_columns([delta_field(field) for field in fields])

    def drop_table(self, address: str) -> None:
        """Deletes the table's folder, its log included, as on a local disk (no message body
        is left behind in a bucket; a writer with a stale lookup then finds no table)."""
        with self._known_lock:
            self._known.discard(address)
            self._sequenced.pop(address, None)
        self._kept.forget(address)
        folder = self._layout.folder(address)
        if folder is not None:  # alone under its commit lock: no writer is half-way in
            remove = functools.partial(shutil.rmtree, folder, ignore_errors=True)
            self.transact(address, remove, f"deleting {address}", alone=True)
        else:  # whether or not a table is left there: a delete cut short left files behind

            def remove_all() -> None:
                try:
                    DeltaStorageHandler(self._uri(address), self._options).delete_dir("")
                except OSError as error:
                    raise asked_again(error) from error

            run_transaction(
                remove_all,
                lock=contextlib.nullcontext,
                policy=self._policy,
                counter=self._conflicts,
                what=f"deleting {address}",
            )

    def _remember(self, address: str) -> None:
        with self._known_lock:
            self._known.add(address)

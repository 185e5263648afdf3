"""The native engine's upkeep of a table (the redrive pass's, services/tidy.py): its size, its
properties, compaction and vacuum, each through delta-rs and, where it commits, as a transaction
of its own (under the commit lock on a local root, as every native write; on object storage
the redrive job compacts under a lease, native_leases.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc

from ..limits import COMPACTED_FILE_BYTES, SMALL_FILE_BYTES
from .native_commits import NO_HOOKS, after_commit
from .tables import PathLayout

if TYPE_CHECKING:
    from deltalake import DeltaTable

T = TypeVar("T")


class NativeUpkeep:
    """What NativeTables does to keep a table healthy (mixed into it: it reads and commits
    through the table's own `open` and `transact`)."""

    _layout: PathLayout

    if TYPE_CHECKING:

        def open(self, address: str) -> DeltaTable: ...

        def transact(
            self, address: str, action: Callable[[], T], what: str, *, alone: bool = False
        ) -> T: ...

    def footprint(self, address: str) -> tuple[int, int]:
        files = self.open(address).get_add_actions(flatten=True)
        sizes = pa.RecordBatchReader.from_stream(files).read_all().column("size_bytes")
        return len(sizes), int(pc.sum(sizes).as_py() or 0)

    def properties(self, address: str) -> dict[str, str]:
        return dict(self.open(address).metadata().configuration)

    def set_properties(self, address: str, properties: dict[str, str]) -> None:
        def change() -> None:
            alter = self.open(address).alter
            alter.set_table_properties(properties, post_commithook_properties=NO_HOOKS)

        self.transact(address, change, f"setting properties of {address}")

    def optimize(self, address: str, shard: int | None = None) -> None:
        """Compacts the table (or one shard) into files of COMPACTED_FILE_BYTES, as Spark's
        compaction does (every claim rewrites the file holding its row), as its own transaction,
        alone under the commit lock on a local root: beside the claims of other processes it
        would lose to each one that rewrote a file it compacts, again and again."""
        where = None if shard is None else [("shard", "=", str(shard))]
        compact = self._compaction(address, where, COMPACTED_FILE_BYTES)
        self.transact(address, compact, f"compacting {address}", alone=True)

    def compact_small(self, address: str) -> None:
        """Merges the table's files under SMALL_FILE_BYTES (a producer's appends, the rewrites
        of claims) into files of about that size, and leaves every larger file as it is: cheap
        enough to run beside consumers (messages/compaction.py), whose claims then rewrite no
        more than that. Alone under the commit lock: on a local root no transaction of any
        process is then in flight on the table, so it meets no conflict (see
        QueueContext.appended for why only there)."""
        compact = self._compaction(address, None, SMALL_FILE_BYTES)
        self.transact(address, compact, f"compacting {address}", alone=True)

    def _compaction(
        self, address: str, where: list[tuple[str, str, str]] | None, size: int
    ) -> Callable[[], None]:
        """One compaction's transaction: its commit, then a checkpoint when that version is due
        one, as after any native commit."""

        def compact() -> None:
            table = self.open(address)
            before = table.version()
            table.optimize.compact(
                partition_filters=where, target_size=size, post_commithook_properties=NO_HOOKS
            )
            after_commit(table, before)

        return compact

    def vacuum(self, address: str, retain_hours: int) -> None:
        """Deletes every file of the table's folder that no version of the last `retain_hours`
        uses (a full listing, as Spark's VACUUM: files of conflicted rewrites included). On a
        local root it lists and deletes with no commit and so without the commit lock, as
        Spark's does there (storage.LOCAL_VACUUM); on object storage delta-rs's VACUUM, which
        records itself, and then the log entries past the table's log retention (Delta's own
        cleanup; logtrim.py trims a local log)."""
        folder = self._layout.folder(address)
        options = {"retention_hours": retain_hours, "enforce_retention_duration": False}
        if folder is not None:
            for path in self.open(address).vacuum(dry_run=True, full=True, **options):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, urlparse(path).path.removeprefix("/")))
            return

        def vacuum() -> None:
            table = self.open(address)
            table.vacuum(dry_run=False, full=True, post_commithook_properties=NO_HOOKS, **options)

        self.transact(address, vacuum, f"vacuuming {address}")
        self.open(address).cleanup_metadata()

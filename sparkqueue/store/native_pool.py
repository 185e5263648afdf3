"""Opened delta-rs tables kept between a broker's operations.

Opening a table reads its last checkpoint and every log entry since (~6 ms on a local disk; on
object storage a request for each, up to twenty with a checkpoint every twenty versions);
catching an opened one up with the entries written meanwhile (`update_incremental`) reads only
those, but lists the log folder to find them (0.3 ms at 80 local entries, 16 ms at 520): a look
at the next version's entry first tells whether there is anything to catch up with.
A receive reads and claims, a delete commits: without the pool each opened the table afresh (a
third of a one-message receive's time locally; on moto's S3 some forty requests of its eighty).
A table is lent to one user at a time (delta-rs moves a table's snapshot forward in place when
it commits) and comes back only after a clean use: one whose commit failed is dropped, its state
unknown. A table that has caught up with MAX_VERSIONS_CAUGHT_UP versions is dropped too: its
state grows with every entry since its open.

A kept table is lent again only while the log entry it stands on is still there: a deleted
queue's entry is gone (its writers must not commit into its folder again). On a local root the
entry's inode and modification time also tell a table made anew at the same path (the registry
and metrics tables' paths are fixed); on object storage that look is a HEAD request, and its
existence is what is checked (a queue's table is never made anew at a path: each has an id of
its own), so lending a kept table there costs one request, two when there are entries to catch
up with, plus theirs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from .native_process import check_process

log = logging.getLogger(__name__)
MAX_IDLE_PER_TABLE = 4  # kept per table: as many as one broker's concurrent users of it, roughly
# A kept table is opened afresh once it has caught up with this many versions: its state holds
# every entry since its open (a fresh one starts from the newest checkpoint), and statements on
# it slow down as that grows (docs/performance.md, "Where a receive's time goes").
MAX_VERSIONS_CAUGHT_UP = 10


class OpenTables:
    """A broker's kept tables, by address (see the module's notes)."""

    def __init__(self, open_fresh: Callable[[str], DeltaTable], entries: LogEntries) -> None:
        self._open_fresh = open_fresh  # raises QueueDoesNotExist for a table that is gone
        self._entries = entries
        self._lock = threading.Lock()
        self._idle: dict[str, list[tuple[DeltaTable, Stamp, int]]] = {}

    @contextmanager
    def lent(self, address: str) -> Iterator[DeltaTable]:
        """The table at its newest version, for one use by this caller alone; back to the pool
        if the use raised nothing (a failed commit's table is dropped instead)."""
        table, opened_at = self._take(address)
        yield table
        self._give(address, table, opened_at)

    def _take(self, address: str) -> tuple[DeltaTable, int]:
        check_process()  # a forked child must not touch a table its parent opened
        with self._lock:
            idle = self._idle.get(address)
            kept = idle.pop() if idle else None
        if kept is not None:
            table, stamp, opened_at = kept
            if not self._caught_up(address, table, stamp):
                self.forget(address)  # the others kept of it stand where this one stood
            elif not _worn(table, opened_at):
                return table, opened_at
        table = self._open_fresh(address)
        return table, table.version()

    def _give(self, address: str, table: DeltaTable, opened_at: int) -> None:
        if _worn(table, opened_at):
            return
        stamp = self._entries.kept_at(address, table.version())
        if stamp is None:
            return
        with self._lock:
            idle = self._idle.setdefault(address, [])
            if len(idle) < MAX_IDLE_PER_TABLE:
                idle.append((table, stamp, opened_at))

    def forget(self, address: str) -> None:
        """Drops the tables kept of `address` (its table is being deleted)."""
        with self._lock:
            self._idle.pop(address, None)

    def _caught_up(self, address: str, table: DeltaTable, stamp: Stamp) -> bool:
        """Whether the table at `address` still holds the entry `table` was kept at (else it
        was deleted, or trimmed that far, or made anew), and `table` has read the entries
        since. A look that fails (a store's fault) says no: the table is opened afresh, as
        without the pool."""
        kept_at = table.version()
        try:
            if not self._entries.holds(address, kept_at, stamp):
                return False
            if not self._entries.holds(address, kept_at + 1, None):
                return True  # versions come in order: none newer (delta-rs would list the log)
            table.update_incremental()
            return self._entries.holds(address, kept_at, stamp)  # not deleted meanwhile
        except Exception as error:  # e.g. the entries it needed were trimmed: open afresh
            log.debug("reopening %s: %s", address, error)
            return False


Stamp = tuple[int, int]  # what tells one log entry file from another at its name


def _worn(table: DeltaTable, opened_at: int) -> bool:
    """Whether a kept table has caught up with too many versions since its open to keep."""
    return table.version() - opened_at > MAX_VERSIONS_CAUGHT_UP


def _entry(version: int) -> str:
    return f"_delta_log/{version:020d}.json"


class LogEntries(Protocol):
    """How the pool looks at a table's log entries on its store."""

    def kept_at(self, address: str, version: int) -> Stamp | None:
        """The stamp to keep a table at `version` with (None: keep none)."""

    def holds(self, address: str, version: int, stamp: Stamp | None) -> bool:
        """Whether the entry of `version` is there (and, with a stamp, is that one)."""


class LocalEntries:
    """On a local root: a stat of the entry file, its inode and modification time."""

    def __init__(self, folder: Callable[[str], str | None]) -> None:
        self._folder = folder

    def kept_at(self, address: str, version: int) -> Stamp | None:
        folder = self._folder(address)
        if folder is None:
            return None
        try:
            found = os.stat(os.path.join(folder, _entry(version)))
        except OSError:
            return None
        return found.st_ino, found.st_mtime_ns

    def holds(self, address: str, version: int, stamp: Stamp | None) -> bool:
        found = self.kept_at(address, version)
        return found is not None and (stamp is None or found == stamp)


_THERE: Stamp = (0, 0)  # an entry on object storage: it is there


class StoredEntries:
    """On object storage: a HEAD request for the entry when a kept table is lent (its
    existence; see the module's notes), none when one is kept."""

    def __init__(self, uri: Callable[[str], str], options: dict[str, str] | None) -> None:
        self._uri, self._options = uri, options
        self._handlers: dict[str, DeltaStorageHandler] = {}

    def kept_at(self, address: str, version: int) -> Stamp | None:
        return _THERE

    def holds(self, address: str, version: int, stamp: Stamp | None) -> bool:
        handler = self._handlers.get(address)
        if handler is None:
            handler = self._handlers[address] = DeltaStorageHandler(
                self._uri(address), self._options
            )
        [info] = handler.get_file_info([_entry(version)])
        return info.type != pafs.FileType.NotFound

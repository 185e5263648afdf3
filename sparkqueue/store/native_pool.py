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
entry's inode and modification time also tell a table made anew at the same path (a
`create_queue` that finishes a delete cut short makes the queue's table anew at its path); on
object storage its modification time and size do (a listing and a HEAD request), and a HEAD of
the next version's entry tells whether there is anything to catch up with: lending a kept table
there costs three requests, keeping it again after a commit two more (after a read, none: its
entry is the one it was lent at).
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
        table, opened_at, known = self._take(address)
        yield table
        self._give(address, table, opened_at, known)

    def _take(self, address: str) -> tuple[DeltaTable, int, Known]:
        """A table to lend, its version at open, and the stamp of the entry it stands on if
        that is known (a kept table that had nothing to catch up with)."""
        check_process()  # a forked child must not touch a table its parent opened
        with self._lock:
            idle = self._idle.get(address)
            kept = idle.pop() if idle else None
        if kept is not None:
            table, stamp, opened_at = kept
            kept_at = table.version()
            try:
                caught_up = self._caught_up(address, table, stamp)
            except Exception as error:  # a store's fault, trimmed entries: this one goes
                log.debug("reopening %s: %s", address, error)
            else:
                if caught_up is None:
                    self.forget(address)  # the others kept of it stand where this one stood
                elif not _worn(table, opened_at):
                    return table, opened_at, None if caught_up else (kept_at, stamp)
        table = self._open_fresh(address)
        return table, table.version(), None

    def _give(self, address: str, table: DeltaTable, opened_at: int, known: Known) -> None:
        if _worn(table, opened_at):
            return
        version = table.version()
        if known is not None and known[0] == version:
            stamp: Stamp | None = known[1]  # read-only use: the entry it was lent at
        else:
            try:
                stamp = self._entries.kept_at(address, version)
            except Exception as error:  # a store's fault: not kept
                log.debug("not keeping %s: %s", address, error)
                return
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
        self._entries.forget(address)

    def _caught_up(self, address: str, table: DeltaTable, stamp: Stamp) -> bool | None:
        """None when the table at `address` no longer holds the entry `table` was kept at (it
        was deleted, or trimmed that far, or made anew); else whether `table` had entries to
        read since, which it has read."""
        kept_at = table.version()
        if not self._entries.holds(address, kept_at, stamp):
            return None
        if not self._entries.holds(address, kept_at + 1, None):
            return False  # versions come in order: none newer (delta-rs would list the log)
        table.update_incremental()
        if not self._entries.holds(address, kept_at, stamp):  # deleted while it caught up
            return None
        return True


Stamp = tuple[int, int]  # what tells one log entry file from another at its name
Known = tuple[int, Stamp] | None  # a lent table's version and its entry's stamp, when known


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

    def forget(self, address: str) -> None:
        """Drops what it holds for `address`."""


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

    def forget(self, address: str) -> None:
        pass


class StoredEntries:
    """On object storage: the entry's modification time and size (a listing and a HEAD
    request), or its existence alone (a HEAD). A queue table deleted and made anew at its path
    (a `create_queue` finishing a delete cut short) writes its entries again at new times."""

    def __init__(self, uri: Callable[[str], str], options: dict[str, str] | None) -> None:
        self._uri, self._options = uri, options
        self._handlers: dict[str, DeltaStorageHandler] = {}

    def kept_at(self, address: str, version: int) -> Stamp | None:
        [info] = self._handler(address).get_file_info([_entry(version)])
        if info.type == pafs.FileType.NotFound:
            return None
        return info.mtime_ns or 0, info.size or 0

    def holds(self, address: str, version: int, stamp: Stamp | None) -> bool:
        if stamp is not None:
            return self.kept_at(address, version) == stamp
        try:
            self._handler(address).open_input_file(_entry(version)).close()
        except FileNotFoundError:
            return False
        return True

    def forget(self, address: str) -> None:
        self._handlers.pop(address, None)

    def _handler(self, address: str) -> DeltaStorageHandler:
        handler = self._handlers.get(address)
        if handler is None:
            handler = self._handlers[address] = DeltaStorageHandler(
                self._uri(address), self._options
            )
        return handler

"""Opened delta-rs tables kept between the operations of a local root.

Opening a table reads its last checkpoint and every log entry since (~6 ms here); catching an
opened one up with the entries written meanwhile (`update_incremental`) reads only those, but
lists the whole log folder to find them (0.3 ms at 80 entries, 16 ms at 520): a stat of the next
version's entry first tells whether there is anything to catch up with.
A receive reads and claims, a delete commits: without the pool each opened the table afresh, a
third of a one-message receive's time. A table is lent to one user at a time (delta-rs moves a
table's snapshot forward in place when it commits) and comes back only after a clean use: one
whose commit failed is dropped, its state unknown. A table that has caught up with
MAX_VERSIONS_CAUGHT_UP versions is dropped too: its state grows with every entry since its open.

Only local roots keep tables: there a stat of the log entry a kept table stands on tells whether
the table is still the one it read (a deleted queue's entry is gone; a table made anew at the
same path wrote another file under that name). On object storage that check is a request of its
own, and every table is opened afresh as before.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from deltalake import DeltaTable

from .native_process import check_process

log = logging.getLogger(__name__)
MAX_IDLE_PER_TABLE = 4  # kept per table: as many as one broker's concurrent users of it, roughly
# A kept table is opened afresh once it has caught up with this many versions: its state holds
# every entry since its open (a fresh one starts from the newest checkpoint), and statements on
# it slow down as that grows (docs/performance.md, "Where a receive's time goes").
MAX_VERSIONS_CAUGHT_UP = 10


class OpenTables:
    """A broker's kept tables, by address (see the module's notes)."""

    def __init__(
        self, open_fresh: Callable[[str], DeltaTable], folder: Callable[[str], str | None]
    ) -> None:
        self._open_fresh = open_fresh  # raises QueueDoesNotExist for a table that is gone
        self._folder = folder  # the table's local folder; None: keep none of it
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
        folder = self._folder(address)
        if folder is not None:
            with self._lock:
                idle = self._idle.get(address)
                kept = idle.pop() if idle else None
            if kept is not None:
                table, stamp, opened_at = kept
                if not _caught_up(table, stamp, folder):
                    self.forget(address)  # the others kept of it stand where this one stood
                elif not _worn(table, opened_at):
                    return table, opened_at
        table = self._open_fresh(address)
        return table, table.version()

    def _give(self, address: str, table: DeltaTable, opened_at: int) -> None:
        folder = self._folder(address)
        if folder is None or _worn(table, opened_at):
            return
        stamp = _stamp(folder, table.version())
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


Stamp = tuple[int, int]  # a log entry file's inode and modification time


def _stamp(folder: str, version: int) -> Stamp | None:
    """Which file holds the log entry of `version` (None: there is none)."""
    try:
        found = os.stat(_entry(folder, version))
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def _worn(table: DeltaTable, opened_at: int) -> bool:
    """Whether a kept table has caught up with too many versions since its open to keep."""
    return table.version() - opened_at > MAX_VERSIONS_CAUGHT_UP


def _entry(folder: str, version: int) -> str:
    return os.path.join(folder, "_delta_log", f"{version:020d}.json")


def _caught_up(table: DeltaTable, stamp: Stamp, folder: str) -> bool:
    """Whether the table in `folder` still holds the entry `table` was kept at (else it was
    deleted, or trimmed that far, or made anew), and `table` has read the entries since."""
    kept_at = table.version()
    if _stamp(folder, kept_at) != stamp:
        return False
    if not os.path.exists(_entry(folder, kept_at + 1)):
        return True  # versions come in order: none newer (delta-rs would list the whole log)
    try:
        table.update_incremental()
    except Exception as error:  # e.g. the entries it needed were trimmed: open afresh
        log.debug("reopening %s: %s", folder, error)
        return False
    return _stamp(folder, kept_at) == stamp  # not deleted or made anew while it caught up

"""Trimming a local table's `_delta_log` to minutes of history instead of days.

Every snapshot update lists a table's whole `_delta_log` folder on a local root (Hadoop's local
file system cannot list from a key), and every operation on a queue makes a new version, so each
entry in that folder costs every later operation: ~60 µs per entry per `receive(1)` here, 2.5 s
at 40,000 entries (docs/performance.md, "Flat over time"). Delta deletes entries only when it
writes a checkpoint, and only those older than `delta.logRetentionDuration` rounded down to the
previous midnight, so a busy local queue carries a day or more of them.

The rule is Delta's own, on a finer clock: the newest checkpoint written at least `keep` ago is
the anchor, and every commit, checksum and checkpoint file of an older version goes. Snapshots at
or after the anchor never read those files. A transaction that had read an older version would
find its next version's file gone and write it again, unseen behind the checkpoint: so the caller
trims while holding the table's commit lock alone (`trim_table_log`), when no commit is in
flight and every later one reads the newest version. (A standard queue's `receive_df` reads and
stages without the lock; its UPDATE, under it, opens the table afresh, and a claim whose read
predates the trim is checked against the log or the table, never committed at that read.)
`keep` then bounds only time travel and how long a plain reader may take between listing the
log and reading the checkpoint it chose.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .locking import process_lock
from .tables import Layout

_VERSIONED = re.compile(r"^(\d{20})\.(?:json|crc|checkpoint\..+)$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")  # classic, single part: complete
# A write's temporary file, left by a killed process: Spark's `.N.json.<uuid>.tmp` and
# delta-rs's `_commit_<uuid>.json.tmp`.
_ORPHAN = re.compile(r"^(?:\..+|_commit_[0-9a-f-]+\.json)\.tmp$")


@dataclass(frozen=True)
class LogEntry:
    """One file in `_delta_log`: its name and when it was last written (epoch seconds)."""

    name: str
    written_at: float


def expired(entries: list[LogEntry], now: float, keep_seconds: float) -> list[str]:
    """The names to delete, oldest version first, so the log always starts at a checkpoint."""
    cutoff = now - keep_seconds
    anchors = [
        int(match.group(1))
        for entry in entries
        if entry.written_at <= cutoff and (match := _CHECKPOINT.match(entry.name))
    ]
    anchor = max(anchors, default=-1)
    doomed = [
        (int(match.group(1)), entry.name)
        for entry in entries
        if (match := _VERSIONED.match(entry.name)) and int(match.group(1)) < anchor
    ]
    orphans = [
        (-1, entry.name)
        for entry in entries
        if entry.written_at <= cutoff and _ORPHAN.match(entry.name)
    ]
    return [name for _, name in sorted(orphans + doomed)]


def trim_log(table_dir: str, now: float, keep_seconds: float) -> int:
    """Deletes what `expired` names from the local table at `table_dir`; returns how many files
    went. Files another process deleted first are skipped."""
    log_dir = os.path.join(table_dir, "_delta_log")
    entries: list[LogEntry] = []
    try:
        with os.scandir(log_dir) as found:
            for item in found:
                try:
                    entries.append(LogEntry(item.name, item.stat().st_mtime))
                except FileNotFoundError:  # deleted since the listing
                    continue
    except FileNotFoundError:  # the table is gone
        return 0
    deleted = 0
    for name in expired(entries, now, keep_seconds):
        try:
            os.remove(os.path.join(log_dir, name))
            deleted += 1
        except FileNotFoundError:
            pass
    return deleted


def clear_unfinished_log(folder: str) -> bool:
    """Removes a `_delta_log` that holds no version yet, as a process killed while creating the
    table leaves it: Delta takes such a folder for an existing table, so `CREATE TABLE IF NOT
    EXISTS` would do nothing and every read would fail. Call it holding the table's commit lock
    (then no creation is under way). Returns whether it removed one."""
    log = os.path.join(folder, "_delta_log")
    if not os.path.isdir(log) or any(_VERSIONED.match(name) for name in os.listdir(log)):
        return False
    shutil.rmtree(log)
    if not os.listdir(folder):
        os.rmdir(folder)
    return True


def trim_table_log(layout: Layout, address: str, keep_seconds: float) -> int:
    """`trim_log` for one table of a local root or schema, holding its commit lock alone (no
    transaction of either engine in flight); elsewhere nothing, as Delta's own cleanup
    (`delta.logRetentionDuration`) and the store's listing apply there."""
    lock_file, folder = layout.lock_file(address), layout.folder(address)
    if lock_file is None or folder is None:
        return 0
    with process_lock(lock_file).hold_alone():
        return trim_log(folder, time.time(), keep_seconds)


def trim_logs(layout: Layout, addresses: Sequence[str], keep_minutes: float) -> int:
    """`trim_table_log` for each table (0 minutes: none), as the redrive job runs it on every
    pass: each log entry slows every later operation on a local table, and a listing plus a few
    deletes cost next to nothing."""
    if not keep_minutes:
        return 0
    return sum(trim_table_log(layout, address, keep_minutes * 60) for address in addresses)

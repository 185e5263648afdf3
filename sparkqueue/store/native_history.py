"""One row's states through a table's versions, read from the Delta log and the files it names.

A queue table has no deletion vectors, so every commit that changes a row adds a file holding the
row as it now is and removes the file that held it. Reading the log forward from its oldest
checkpoint therefore gives each state a message went through, with the version and time of the
commit that made it, at no cost to the operations that wrote them (no change data feed, nothing
written besides the change itself: docs/how-it-works.md, "A message's history").

It reaches as far back as the log and the removed files are kept: the oldest checkpoint still in
`_delta_log` (local roots keep minutes of log, see logtrim.py; object storage
`delta.logRetentionDuration`) and `delta.deletedFileRetentionDuration` for the files. The first state
that can be read comes as `RowState(kept=True)`: the row's own columns tell what went before.

Message ids sort by send time (rules/ids.py), so each file's min/max statistics rule out almost
every file without opening it; the few left are read with a filter on the id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.fs import DeltaStorageHandler
from pyarrow import fs

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet$")
LOG = "_delta_log"
CLOCK_SKEW = timedelta(minutes=10)  # between the sender's clock and the store's


class LogTrimmed(Exception):
    """A version listed a moment ago is gone (the redrive pass trims a local log from its oldest
    end, where a history starts reading): read again from the new oldest checkpoint."""


@dataclass(frozen=True)
class RowState:
    """The row after `version` (None: no longer in the table), with the commit's time. `kept`:
    the first state that could be read, the ones before it gone (trimmed from the log, or their
    files vacuumed)."""

    version: int
    at: datetime
    row: dict[str, Any] | None
    kept: bool = False


def row_states(
    uri: str, message_id: str, storage_options: Mapping[str, str] | None = None
) -> Iterator[RowState]:
    """The states of the row with `message_id`, oldest first, one per version that changed it."""
    files = _file_system(uri, storage_options)
    listing = files.get_file_info(fs.FileSelector(LOG))
    commits = sorted(
        (int(m.group(1)), _utc(info.mtime))
        for info in listing
        if (m := _COMMIT.match(info.base_name))
    )
    if not commits:
        return
    oldest = commits[0][0]
    born = _sent_time(message_id)
    if born is not None:  # versions written before the message was sent cannot hold it
        commits = [(v, at) for v, at in commits if at is None or at >= born - CLOCK_SKEW]
    if not commits:
        return
    holding: set[str] = set()  # the files the row was read in (never a guess)
    state: dict[str, Any] | None = None
    gap = False  # a state could not be read (its file vacuumed): the next one read is summarised
    first = commits[0][0]
    if first == oldest > 0:  # it may be older than the kept log: start from a checkpoint
        checkpoints = sorted(
            int(m.group(1)) for info in listing if (m := _CHECKPOINT.match(info.base_name))
        )
        start = next((c for c in checkpoints if c + 1 >= oldest), None)
        if start is None:
            return  # neither the versions before nor a checkpoint to start from
        holding, state, gap = _kept(
            files, _snapshot(uri, files, start, storage_options), message_id
        )
        if state is not None:
            yield RowState(start, state["sent_at"], state, kept=True)
        first = start + 1
    for version in (v for v, _ in commits if v >= first):
        try:
            actions = _actions(files, version)
        except FileNotFoundError:  # trimmed while we read: what it removed is unknown
            raise LogTrimmed(version) from None
        removed = {unquote(a["remove"]["path"]) for a in actions if "remove" in a}
        if holding and not holding & removed:
            continue  # without deletion vectors a row changes only with its file rewritten
        found, added, unread = _find(files, actions, message_id)
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        at = datetime.fromtimestamp(info.get("timestamp", 0) / 1000, UTC)
        if found is not None:
            holding = (holding - removed) | added
            if found != state:  # else rewritten as it was (compaction, another row's change)
                state = found
                yield RowState(version, at, state, kept=gap)
                gap = False
        elif unread:  # maybe in a file beyond reach: followed again once read again
            holding -= removed
            gap = True
        elif holding and holding <= removed:
            holding = set()
            state = None
            yield RowState(version, at, None)


def _find(
    files: fs.FileSystem, actions: list[dict[str, Any]], message_id: str
) -> tuple[dict[str, Any] | None, set[str], set[str]]:
    """The row as a commit's added files hold it, the files holding it, and the files that might
    hold it but are gone (vacuumed)."""
    found: dict[str, Any] | None = None
    added: set[str] = set()
    unread: set[str] = set()
    for add in (a["add"] for a in actions if "add" in a):
        if not _may_hold(add, message_id):
            continue
        try:
            row = _read_row(files, add, message_id)
        except FileNotFoundError:
            unread.add(unquote(add["path"]))
            continue
        if row is not None:
            found = row
            added.add(unquote(add["path"]))
    return found, added, unread


def _snapshot(
    uri: str, files: fs.FileSystem, version: int, storage_options: Mapping[str, str] | None
) -> DeltaTable:
    """The table at a checkpoint's version; LogTrimmed if the checkpoint went since the listing."""
    try:
        return DeltaTable(uri, version=version, storage_options=storage_options)
    except (DeltaError, OSError):
        listed = files.get_file_info(fs.FileSelector(LOG))
        if any(_CHECKPOINT.match(i.base_name) and int(i.base_name[:20]) == version for i in listed):
            raise  # still there: a failure of its own (credentials, the store), said as it is
        raise LogTrimmed(version) from None


def _sent_time(message_id: str) -> datetime | None:
    """When a message was sent, from its id's first 48 bits (rules/ids.py); None if not ours."""
    digits = message_id.replace("-", "")[:12]
    try:
        return datetime.fromtimestamp(int(digits, 16) / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _file_system(uri: str, storage_options: Mapping[str, str] | None) -> fs.FileSystem:
    if "://" not in uri or uri.startswith("file:"):
        local = uri.removeprefix("file://").removeprefix("file:")
        return fs.SubTreeFileSystem(local, fs.LocalFileSystem())
    handler = DeltaStorageHandler(uri, dict(storage_options) if storage_options else None)
    return fs.PyFileSystem(handler)


def _actions(files: fs.FileSystem, version: int) -> list[dict[str, Any]]:
    with files.open_input_stream(f"{LOG}/{version:020d}.json") as stream:
        text = stream.read().decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _kept(
    files: fs.FileSystem, table: DeltaTable, message_id: str
) -> tuple[set[str], dict[str, Any] | None, bool]:
    """The files holding the row at a checkpoint's version, the row, and whether a file that
    might hold it is gone (vacuumed)."""
    adds = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    names = adds.column_names
    holding: set[str] = set()
    state = None
    gone = False
    for add in adds.to_pylist():
        low, high = add.get("min.message_id"), add.get("max.message_id")
        if low is not None and high is not None and not str(low) <= message_id <= str(high):
            continue
        values = {n.removeprefix("partition."): add[n] for n in names if n.startswith("partition.")}
        try:
            row = _read_row(files, {"path": add["path"], "partitionValues": values}, message_id)
        except FileNotFoundError:
            gone = True
            continue
        if row is not None:
            holding.add(unquote(add["path"]))
            state = row
    return holding, state, gone and state is None


def _may_hold(add: Mapping[str, Any], message_id: str) -> bool:
    """Whether the file's statistics leave room for the id (no statistics: it may)."""
    try:
        stats = json.loads(add.get("stats") or "{}")
        low, high = stats["minValues"]["message_id"], stats["maxValues"]["message_id"]
    except (KeyError, TypeError, ValueError):
        return True
    return bool(low <= message_id <= high)


def _read_row(
    files: fs.FileSystem, add: Mapping[str, Any], message_id: str
) -> dict[str, Any] | None:
    with files.open_input_file(unquote(add["path"])) as source:
        parquet = pq.ParquetFile(source)
        ids = parquet.read(columns=["message_id"]).column(0).cast(pa.string())  # or views
        at = pc.index(ids, message_id).as_py()
        if at < 0:
            return None  # the id column alone was read: bodies only for the row itself
        table = parquet.read()
    row = {name: _utc(value) for name, value in table.slice(at, 1).to_pylist()[0].items()}
    for name, value in (add.get("partitionValues") or {}).items():
        row[name] = None if value is None else int(value)  # a queue table's only one: shard
    return row


def _utc(value: Any) -> Any:
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None:  # INT96 (Spark's default) reads back without a zone
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)

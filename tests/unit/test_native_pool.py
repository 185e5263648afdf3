"""Kept tables (store/native_pool.py): caught up with the log on every use, and never the
table of a path whose table was deleted or made anew."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sparkqueue import Broker
from sparkqueue.store.native_pool import MAX_VERSIONS_CAUGHT_UP, LocalEntries, OpenTables
from sparkqueue.store.native_tables import NativeTables


class Gone(Exception):
    pass


def _pool(folder: str) -> OpenTables:
    def open_fresh(address: str) -> DeltaTable:
        try:
            return DeltaTable(address)
        except Exception as error:
            raise Gone(address) from error

    return OpenTables(open_fresh, LocalEntries(lambda address: address))


def _values(table: DeltaTable) -> list[int]:
    return sorted(pa.table(table.to_pyarrow_table())["a"].to_pylist())


def test_a_kept_table_is_caught_up_with_commits_made_elsewhere(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, pa.table({"a": [1]}))
    pool = _pool(folder)
    with pool.lent(folder) as table:
        kept = table
    write_deltalake(folder, pa.table({"a": [2]}), mode="append")  # another writer
    with pool.lent(folder) as table:
        assert table is kept and table.version() == 1 and _values(table) == [1, 2]


def test_a_table_deleted_or_made_anew_at_its_path_is_never_the_kept_one(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, pa.table({"a": [1]}))
    write_deltalake(folder, pa.table({"a": [2]}), mode="append")
    pool = _pool(folder)
    with pool.lent(folder):
        pass
    shutil.rmtree(folder)
    with pytest.raises(Gone), pool.lent(folder):  # not the kept table: it would write into
        pass  # the empty path
    write_deltalake(folder, pa.table({"a": [7]}))  # a new table at version 0
    with pool.lent(folder):
        pass
    shutil.rmtree(folder)
    for value in (8, 9, 10):  # the new table passes the version the old one stood at
        write_deltalake(folder, pa.table({"a": [value]}), mode="append")
    with pool.lent(folder) as table:
        assert table.version() == 2 and _values(table) == [8, 9, 10]


def test_a_table_whose_use_failed_is_not_kept(tmp_path):
    folder = str(tmp_path / "t")
    write_deltalake(folder, pa.table({"a": [1]}))
    pool = _pool(folder)
    with pytest.raises(RuntimeError), pool.lent(folder) as table:
        failed = table
        raise RuntimeError("a commit that lost")
    with pool.lent(folder) as table:
        assert table is not failed


def test_a_kept_table_with_nothing_newer_is_not_caught_up_by_a_listing(tmp_path, monkeypatch):
    """delta-rs's catch-up lists the whole log folder (16 ms at 520 entries): a kept table
    whose next version's entry does not exist yet is taken as it is."""
    folder = str(tmp_path / "t")
    write_deltalake(folder, pa.table({"a": [1]}))
    pool = _pool(folder)
    with pool.lent(folder):
        pass
    listings = []
    catch_up = DeltaTable.update_incremental
    monkeypatch.setattr(
        DeltaTable, "update_incremental", lambda self: listings.append(1) or catch_up(self)
    )
    with pool.lent(folder) as table:
        assert table.version() == 0
    assert listings == []
    write_deltalake(folder, pa.table({"a": [2]}), mode="append")
    with pool.lent(folder) as table:
        assert table.version() == 1 and _values(table) == [1, 2]
    assert listings == [1]


def test_a_kept_table_is_opened_afresh_once_it_caught_up_with_many_versions(tmp_path):
    """Its state holds every entry since its open, and statements on it slow down as that grows
    (4 consumer threads: 224-235 msg/s with tables kept for good, 358 with this cap)."""
    folder = str(tmp_path / "t")
    write_deltalake(folder, pa.table({"a": [0]}))
    pool = _pool(folder)
    with pool.lent(folder) as table:
        first = table
    for value in range(1, MAX_VERSIONS_CAUGHT_UP + 2):
        with pool.lent(folder) as table:
            assert table is first
            write_deltalake(table, pa.table({"a": [value]}), mode="append")
    with pool.lent(folder) as table:
        assert table is not first and table.version() == MAX_VERSIONS_CAUGHT_UP + 1
        second = table
    for value in range(MAX_VERSIONS_CAUGHT_UP + 1):  # written elsewhere while it was kept
        write_deltalake(folder, pa.table({"a": [value]}), mode="append")
    with pool.lent(folder) as table:
        assert table is not second and table.version() == 2 * MAX_VERSIONS_CAUGHT_UP + 2


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "root")


def test_a_receive_lends_the_table_it_read_back(root, monkeypatch):
    """A receive reads and claims, a delete commits: all on one kept table, none opened
    afresh (an open reads the last checkpoint and every entry since; on object storage a
    request each)."""
    opened = []
    fresh = NativeTables.open

    def counted(self, *args, **kwargs):
        opened.append(args)
        return fresh(self, *args, **kwargs)

    monkeypatch.setattr(NativeTables, "open", counted)  # before the broker's pool holds it
    broker = Broker(None, root)
    queue = broker.create_queue("work")
    queue.send_batch([f"m{i}" for i in range(5)])
    queue.delete(queue.receive(1)[0].receipt_handle)  # the table is kept from here on
    opened.clear()
    for _ in range(MAX_VERSIONS_CAUGHT_UP // 2 - 2):
        [message] = queue.receive(1)
        queue.delete(message.receipt_handle)
    assert opened == []

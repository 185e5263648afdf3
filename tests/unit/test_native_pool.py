"""Kept tables (store/native_pool.py): caught up with the log on every use, and never the
table of a path whose table was deleted or made anew."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sparkqueue.store.native_pool import OpenTables


class Gone(Exception):
    pass


def _pool(folder: str) -> OpenTables:
    def open_fresh(address: str) -> DeltaTable:
        try:
            return DeltaTable(address)
        except Exception as error:
            raise Gone(address) from error

    return OpenTables(open_fresh, lambda address: address)


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
    with pytest.raises(Gone):  # not the kept table, which would write into the empty path
        pool.take(folder)
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

"""Rows to Arrow and back (store/native_arrow.py), column by column, through a real Delta table:
what goes in comes out, timestamps as aware UTC datetimes, maps as dicts, nulls as None."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from sparkqueue.store.native_arrow import arrow_table, read_rows

COLUMNS = (
    ("id", "string", False),
    ("count", "int", True),
    ("tags", "map", True),
    ("at", "timestamp", True),
)


def _read(folder: str, statement: str) -> list[dict]:
    found = QueryBuilder().register("t", DeltaTable(folder)).execute(statement)
    return read_rows(pa.RecordBatchReader.from_stream(found).read_all())


def test_rows_come_back_as_they_went_in(tmp_path):
    folder = str(tmp_path / "t")
    at = datetime(2026, 11, 27, 10, 30, 0, 123456, tzinfo=UTC)
    elsewhere = datetime(2026, 11, 27, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    rows = [
        {"id": "a", "count": 1, "tags": {"k": "v", "x": "y"}, "at": at},
        {"id": "b", "count": None, "tags": {}, "at": elsewhere},
        {"id": "c"},  # a column a row lacks is null
    ]
    write_deltalake(folder, arrow_table(rows, COLUMNS))
    back = _read(folder, "SELECT * FROM t ORDER BY id")
    assert back == [
        {"id": "a", "count": 1, "tags": {"k": "v", "x": "y"}, "at": at},
        {"id": "b", "count": None, "tags": {}, "at": elsewhere},
        {"id": "c", "count": None, "tags": None, "at": None},
    ]
    assert back[0].at.tzinfo is UTC and back[1].at.tzinfo is UTC  # as Spark's rows are
    assert back[0].tags == {"k": "v", "x": "y"} and isinstance(back[0].tags, dict)


def test_an_aggregate_and_an_empty_result_read_alike(tmp_path):
    folder = str(tmp_path / "t")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    write_deltalake(folder, arrow_table([{"id": "a", "at": at}, {"id": "b"}], COLUMNS))
    [row] = _read(folder, "SELECT MIN(at) AS first, COUNT(*) AS n FROM t")
    assert (row.first, row.n) == (at, 2) and row.first.tzinfo is UTC
    assert _read(folder, "SELECT * FROM t WHERE id = 'none'") == []


def test_a_timestamp_without_a_zone_is_read_as_utc():
    naive = pa.table({"at": pa.array([datetime(2026, 1, 1, 8)], pa.timestamp("us"))})
    [row] = read_rows(naive)
    assert row.at == datetime(2026, 1, 1, 8, tzinfo=UTC)

"""Rows between Python and Arrow as the native engine reads and writes them: each queue column's
Arrow type, and rows read back as both engines return them (aware UTC datetimes, maps as dicts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from .schema import Columns
from .statements import Row

ARROW_TYPES = {
    "int": pa.int32(),
    "long": pa.int64(),
    "string": pa.string(),
    "map": pa.map_(pa.string(), pa.string()),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}


def arrow_schema(columns: Columns) -> pa.Schema:
    return pa.schema([pa.field(n, ARROW_TYPES[t], nullable) for n, t, nullable in columns])


def read_rows(found: pa.Table) -> list[Row]:
    """Rows as both engines return them: aware UTC datetimes, maps as dicts.

    Converted column by column (a timestamp column cast to the offset `+00:00`, which Arrow
    hands out as `datetime.UTC`): a batch of thousands of rows pays a per-value type check
    otherwise. A timestamp without a zone is taken as UTC, as the tables store them."""
    columns = []
    for field, column in zip(found.schema, found.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            column = column.cast(pa.timestamp(field.type.unit, tz="+00:00"))
        values = column.to_pylist()
        if pa.types.is_map(field.type):
            values = [None if value is None else dict(value) for value in values]
        columns.append(values)
    names = found.column_names
    return [Row(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def arrow_table(rows: Sequence[Mapping[str, Any]], columns: Columns) -> pa.Table:
    """Rows as an Arrow table of `columns` (a column a row lacks is null there), built column by
    column: maps as Arrow takes them (key-value pairs)."""
    schema = arrow_schema(columns)
    arrays = []
    for field, (name, kind, _) in zip(schema, columns, strict=True):
        values = [row.get(name) for row in rows]
        if kind == "map":
            values = [None if value is None else list(value.items()) for value in values]
        arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def delta_field(field: pa.Field) -> Any:
    from deltalake import Field

    return Field.from_arrow(field)

"""Rows between Python and Arrow as the native engine reads and writes them: each queue column's
Arrow type, and rows read back as both engines return them (aware UTC datetimes, maps as dicts)."""

from __future__ import annotations

from datetime import UTC, datetime
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


def read_row(values: dict[str, Any]) -> Row:
    """A row as both engines return it: aware UTC datetimes, maps as dicts."""
    for name, value in values.items():
        if isinstance(value, datetime):
            values[name] = value.astimezone(UTC)
        elif isinstance(value, list) and (not value or isinstance(value[0], tuple)):
            values[name] = dict(value)
    return Row(values)


def arrow_row(row: dict[str, Any]) -> dict[str, Any]:
    """Maps as Arrow takes them (key-value pairs)."""
    return {k: list(v.items()) if isinstance(v, dict) else v for k, v in row.items()}


def delta_field(field: pa.Field) -> Any:
    from deltalake import Field

    return Field.from_arrow(field)

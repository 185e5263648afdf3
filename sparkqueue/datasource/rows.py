"""Rows between Spark and the queue: what a read yields (receive_df's columns, as Arrow) and what
a write takes (send_df's columns, checked by the rules every send obeys)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from ..attributes import QueueAttributes
from ..engine.messages.send import SendEntry, normalize_entry
from ..errors import InvalidParameterValue
from ..store.spark_schema import MESSAGE_FRAME_SCHEMA

SCHEMA = MESSAGE_FRAME_SCHEMA  # every read's columns, the stream's and the batch read's
_ARROW = to_arrow_schema(SCHEMA, timezone="UTC")
# What a write takes, by column name: send_df's columns (body alone is required).
WRITE_COLUMNS = {
    "body": (StringType,),
    "attributes": (MapType,),
    "group_id": (StringType,),
    "deduplication_id": (StringType,),
    "delay_seconds": (IntegerType, LongType, ShortType),
}


def batch_rows(table: pa.Table) -> pa.Table:
    """A native read's rows in SCHEMA's Arrow types and order (columns it lacks are null)."""
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in _ARROW
    ]
    return pa.Table.from_arrays(columns, schema=_ARROW)


def check_write_schema(schema: StructType) -> None:
    """A written DataFrame's columns are send_df's: `body`, and any of the others."""
    for column in schema.fields:
        allowed = WRITE_COLUMNS.get(column.name)
        if allowed is None:
            raise InvalidParameterValue(
                f"the sparkqueue data source writes the columns {list(WRITE_COLUMNS)} (body"
                f" required); the DataFrame has {column.name!r}: select or rename its columns"
            )
        if not isinstance(column.dataType, allowed):
            raise InvalidParameterValue(
                f"the column {column.name!r} must be of type"
                f" {' or '.join(t.__name__ for t in allowed)}, not {column.dataType.simpleString()}"
            )
    if "body" not in schema.names:
        raise InvalidParameterValue("the sparkqueue data source needs a 'body' column to write")


def entries(rows: Iterable[Any], attributes: QueueAttributes) -> list[SendEntry]:
    """Each row checked as `send` checks an entry; the first that breaks a rule fails the whole
    write (Spark then commits nothing), naming the rule."""
    checked = []
    for number, row in enumerate(rows):
        entry = {name: value for name, value in row.asDict().items() if value is not None}
        if "attributes" in entry:
            entry["attributes"] = dict(entry["attributes"])
        try:
            checked.append(normalize_entry(entry, attributes))
        except InvalidParameterValue as error:
            raise InvalidParameterValue(
                f"row {number} of a task's rows cannot be sent, so nothing is: {error.message}"
            ) from None
    return checked

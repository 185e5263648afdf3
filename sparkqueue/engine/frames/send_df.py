"""Sending from Spark: `send_df`'s rows checked and written in one commit, and sends to FIFO
tables numbered by Delta row ids (which only Spark writes; see fifo/spark.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from ...attributes import QueueAttributes
from ...clock import to_micros
from ...errors import InvalidParameterValue
from ...limits import MAX_DELAY_SECONDS
from ...model import SentMessage
from ...rules.checks import check_int
from ...rules.ids import message_id_column
from ...rules.validation import check_fifo_options, row_problem_column
from ...store.registry import QueueRecord
from ...store.schema import QUEUE_WRITE_OPTIONS
from ...store.spark_schema import ATTRIBUTES_TYPE, MESSAGE_SCHEMA
from ..context import QueueContext
from ..fifo import spark as spark_fifo
from ..fifo.spark import ENTRY_ORDER, deduplication_column, home_shard, in_entry_order

INVALID_ROW_MARKER = "sparkqueue: invalid send_df row: "


def send_df_frame(
    df: DataFrame,
    attrs: QueueAttributes,
    *,
    body: str,
    attributes: str | None,
    group_id: str | None,
    deduplication_id: str | None,
    delay_seconds: str | int | None,
    now: datetime,
) -> DataFrame:
    """The rows send_df writes (FIFO: with their `ENTRY_ORDER`); a row that breaks a rule fails
    the write, so nothing commits."""
    if attrs.fifo:
        check_fifo_options(delay_seconds, group_id, deduplication_id, attrs, "=<column>")
    columns = {
        "body": _column(df, body, "body", (StringType,)),
        "attributes": _attributes_column(df, attributes),
        "group_id": _optional_string(df, group_id, "group_id"),
        "deduplication_id": _optional_string(df, deduplication_id, "deduplication_id"),
    }
    if delay_seconds is None:
        delay = F.lit(attrs.delay_seconds)
    elif isinstance(delay_seconds, str):
        delay = _column(df, delay_seconds, "delay_seconds", (IntegerType, LongType, ShortType))
    else:
        delay = F.lit(check_int("delay_seconds", delay_seconds, 0, MAX_DELAY_SECONDS))
    problem = row_problem_column(
        columns["body"],
        columns["attributes"],
        columns["group_id"],
        columns["deduplication_id"],
        delay,
        attrs.max_message_bytes,
    )
    if attrs.fifo:
        columns["deduplication_id"] = deduplication_column(
            columns["body"], columns["group_id"], columns["deduplication_id"], attrs
        )
        problem = F.coalesce(
            problem,
            F.when(columns["group_id"].isNull(), F.lit("the group id is missing")).when(
                columns["deduplication_id"].isNull(), F.lit("the deduplication id is missing")
            ),
        )
    sent_us = to_micros(now)
    checked = df.select(
        F.when(problem.isNotNull(), F.raise_error(F.concat(F.lit(INVALID_ROW_MARKER), problem)))
        .otherwise(columns["body"])
        .alias("body"),
        *(columns[name].alias(name) for name in ("attributes", "group_id", "deduplication_id")),
        delay.cast("long").alias("delay"),
    ).withColumn("message_id", message_id_column(to_micros(now)))
    rows = checked.select(
        home_shard(attrs).alias("shard"),
        "message_id",
        "body",
        "attributes",
        "group_id",
        "deduplication_id",
        F.lit(None).cast("long").alias("sequence_number"),
        F.lit(now).alias("sent_at"),
        F.timestamp_micros(F.lit(sent_us) + F.col("delay") * 1_000_000).alias("visible_at"),
        F.lit(None).cast("string").alias("receipt_handle"),
        F.lit(0).alias("receive_count"),
        F.lit(None).cast("timestamp").alias("first_received_at"),
        F.lit(None).cast("timestamp").alias("handle_issued_at"),
        F.lit(None).cast("string").alias("moved_from"),
        F.lit(None).cast(ATTRIBUTES_TYPE).alias("attribute_types"),
    )
    if not attrs.fifo:
        return rows
    return rows.withColumn(ENTRY_ORDER, F.monotonically_increasing_id())


def invalid_row_problem(error: BaseException) -> str | None:
    """The rule a send_df row broke, if `error` is the write failing on one; else None."""
    text = str(error)
    start = text.find(INVALID_ROW_MARKER)
    if start < 0:
        return None
    return text[start + len(INVALID_ROW_MARKER) :].split("\n", 1)[0].strip().rstrip(".")


def _column(df: DataFrame, name: str, what: str, types: tuple[type, ...]) -> Column:
    if not isinstance(name, str) or name not in df.columns:
        raise InvalidParameterValue(
            f"send_df: {what}={name!r} is not a column; columns: {df.columns}"
        )
    data_type = df.schema[name].dataType
    if not isinstance(data_type, types):
        raise InvalidParameterValue(
            f"send_df: column {name!r} ({what}) has type {data_type.simpleString()}; expected"
            f" {' or '.join(t.typeName() for t in types)}"
        )
    return F.col(name)


def _attributes_column(df: DataFrame, name: str | None) -> Column:
    if name is None:
        return F.lit(None).cast(ATTRIBUTES_TYPE)
    column = _column(df, name, "attributes", (MapType,))
    data_type = df.schema[name].dataType
    if not (
        isinstance(data_type.keyType, StringType) and isinstance(data_type.valueType, StringType)
    ):
        raise InvalidParameterValue(
            f"send_df: column {name!r} (attributes) has type {data_type.simpleString()};"
            " expected map<string,string>"
        )
    return column


def _optional_string(df: DataFrame, name: str | None, what: str) -> Column:
    if name is None:
        return F.lit(None).cast("string")
    return _column(df, name, what, (StringType,))


def send_fifo_rows(
    ctx: QueueContext, record: QueueRecord, rows: list[dict[str, Any]]
) -> list[SentMessage]:
    """A send to a row-tracking FIFO table: the rows in entry order, each in its group's shard, in one commit (so Delta
    gives them row ids, their sequence numbers, in that order); then the id each counts as."""
    names = MESSAGE_SCHEMA.names
    schema = StructType([*MESSAGE_SCHEMA.fields, StructField(ENTRY_ORDER, IntegerType())])
    ordered = [(*(row[n] for n in names), position) for position, row in enumerate(rows)]
    entered = ctx.storage.spark.createDataFrame(ordered, schema)
    frame = in_entry_order(entered.withColumn("shard", home_shard(record.attributes)))
    ctx.storage.append(
        record.location, frame, f"sending to {record.name!r}", options=QUEUE_WRITE_OPTIONS
    )
    sent = {row["message_id"]: row["deduplication_id"] for row in rows}
    originals = spark_fifo.originals(ctx.read(record), sent)
    return [originals[row["message_id"]] for row in rows]


def send_df(
    ctx: QueueContext,
    record: QueueRecord,
    df: DataFrame,
    *,
    body: str,
    attributes: str | None,
    group_id: str | None,
    deduplication_id: str | None,
    delay_seconds: str | int | None,
) -> int:
    """Bulk send in one commit; returns the rows written, as the write itself counted them.

    Nothing is read back after the commit, so a successful send never raises (a caller that
    retried after such an error would send everything twice). Any invalid row fails the write
    before it commits, so then nothing is written."""
    rows = send_df_frame(
        df,
        record.attributes,
        body=body,
        attributes=attributes,
        group_id=group_id,
        deduplication_id=deduplication_id,
        delay_seconds=delay_seconds,
        now=ctx.now(),
    )
    what = f"send_df to {record.name!r}"
    try:
        if ctx.sequenced(record):
            return spark_fifo.append_frame(ctx.native_writer(record), record, rows, what)
        if record.attributes.fifo:
            rows = in_entry_order(rows)
        written = ctx.storage.append(
            record.location,
            rows,
            what,
            options=QUEUE_WRITE_OPTIONS,
            observe=[F.count(F.lit(1)).alias("rows")],
        )["rows"]
    except Exception as error:
        problem = invalid_row_problem(error)
        if problem is None:
            raise
        raise InvalidParameterValue(
            f"send_df: a row is invalid ({problem}); nothing was written"
        ) from None
    return int(written)

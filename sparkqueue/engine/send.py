"""Sending: user input validated into message rows, then written as one blind append per call."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
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

from ..attributes import QueueAttributes
from ..clock import to_micros
from ..errors import InvalidParameterValue, MissingParameter
from ..limits import MAX_DELAY_SECONDS
from ..model import SentMessage
from ..rules.checks import check_int
from ..rules.ids import content_deduplication_id, message_id_column, new_message_id
from ..rules.validation import (
    check_attribute_types,
    check_attributes,
    check_identifier,
    check_size,
    check_text,
    message_size,
    row_problem_column,
)
from ..store.registry import QueueRecord
from ..store.schema import ATTRIBUTES_TYPE, MESSAGE_SCHEMA, QUEUE_WRITE_OPTIONS
from . import fifo
from .context import QueueContext
from .fifo import ENTRY_ORDER, deduplication_column, home_shard, in_entry_order

ENTRY_KEYS = (
    "body", "delay_seconds", "attributes", "group_id", "deduplication_id", "attribute_types"
)  # fmt: skip
INVALID_ROW_MARKER = "sparkqueue: invalid send_df row: "


@dataclass(frozen=True)
class SendEntry:
    """One validated message to write."""

    body: str
    attributes: dict[str, str]
    group_id: str | None
    deduplication_id: str | None
    delay_seconds: int
    attribute_types: dict[str, str]


def normalize_entry(entry: str | dict[str, Any], attrs: QueueAttributes) -> SendEntry:
    """Validates one send/send_batch entry against the queue's rules."""
    if isinstance(entry, str):
        entry = {"body": entry}
    if not isinstance(entry, dict):
        raise InvalidParameterValue(
            f"an entry is a str body or a dict with the keys {list(ENTRY_KEYS)}, got"
            f" {type(entry).__name__}"
        )
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise InvalidParameterValue(f"unknown entry key(s) {unknown}; allowed: {list(ENTRY_KEYS)}")
    if "body" not in entry:
        raise InvalidParameterValue("an entry dict needs a 'body'")
    body = check_text("the body", entry["body"])
    attributes = check_attributes(entry.get("attributes"))
    attribute_types = check_attribute_types(entry.get("attribute_types"), attributes)
    check_size(message_size(body, attributes), attrs.max_message_bytes)
    group_id = check_identifier("group_id", entry.get("group_id"))
    deduplication_id = check_identifier("deduplication_id", entry.get("deduplication_id"))
    delay = entry.get("delay_seconds")
    if attrs.fifo:
        _check_fifo_options(delay, group_id, deduplication_id, attrs)
        if deduplication_id is None:
            deduplication_id = content_deduplication_id(body)
    if delay is None:
        delay = attrs.delay_seconds
    check_int("delay_seconds", delay, 0, MAX_DELAY_SECONDS)
    return SendEntry(body, attributes, group_id, deduplication_id, delay, attribute_types)


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
    """The rows send_df writes; a row that breaks a rule fails the write, so nothing commits."""
    if attrs.fifo:
        _check_fifo_options(delay_seconds, group_id, deduplication_id, attrs, "=<column>")
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
            columns["body"], columns["deduplication_id"], attrs
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
    return in_entry_order(rows.withColumn(ENTRY_ORDER, F.monotonically_increasing_id()))


def _check_fifo_options(
    delay: Any,
    group_id: str | None,
    deduplication_id: str | None,
    attrs: QueueAttributes,
    how: str = "",
) -> None:
    """SQS's FIFO rules for what a send must and must not carry."""
    if delay is not None and (isinstance(delay, bool) or delay != 0):  # an explicit 0 is fine
        raise InvalidParameterValue(
            "FIFO queues take no per-message delay_seconds other than 0; set the queue's"
            " delay_seconds instead"
        )
    if group_id is None:
        raise MissingParameter(f"a FIFO queue needs group_id{how} for every message")
    if deduplication_id is None and not attrs.content_based_deduplication:
        raise MissingParameter(
            f"a FIFO queue needs deduplication_id{how} for every message unless the queue has"
            " content_based_deduplication=True"
        )


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


def send_entries(
    ctx: QueueContext, record: QueueRecord, entries: list[SendEntry]
) -> list[SentMessage]:
    """Writes validated entries in one commit, to one random shard (standard) or each to its
    group's shard (FIFO); returns their ids (on FIFO queues, a duplicate gets the id of the
    message it repeats) and, on FIFO queues, the sequence numbers the commit gave them."""
    now = ctx.now()
    micros = to_micros(now)
    shard = random.randrange(record.attributes.shards)
    ids = [new_message_id(micros) for _ in entries]
    rows = [
        (shard, message_id, entry.body, entry.attributes, entry.group_id, entry.deduplication_id,
         None, now, now + timedelta(seconds=entry.delay_seconds), None, 0, None, None, None,
         entry.attribute_types or None)
        for message_id, entry in zip(ids, entries, strict=True)
    ]  # fmt: skip
    spark = ctx.storage.spark
    if record.attributes.fifo:
        schema = StructType([*MESSAGE_SCHEMA.fields, StructField(ENTRY_ORDER, IntegerType())])
        ordered = [(*row, position) for position, row in enumerate(rows)]
        entered = spark.createDataFrame(ordered, schema)
        frame = in_entry_order(entered.withColumn("shard", home_shard(record.attributes)))
    else:
        frame = spark.createDataFrame(rows, MESSAGE_SCHEMA)
    ctx.storage.append(
        record.location, frame, f"sending to {record.name!r}", options=QUEUE_WRITE_OPTIONS
    )
    if not record.attributes.fifo:
        return [SentMessage(message_id) for message_id in ids]
    sent = {i: e.deduplication_id for i, e in zip(ids, entries, strict=True)}
    originals = fifo.originals(ctx.read(record), sent)  # type: ignore[arg-type]
    return [originals[message_id] for message_id in ids]


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
    try:
        written = ctx.storage.append(
            record.location,
            rows,
            f"send_df to {record.name!r}",
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

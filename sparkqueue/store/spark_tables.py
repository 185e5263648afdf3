"""The Spark engine's `Tables`: the per-message statements on a broker's interpreting session.

Timestamps are read as exact epoch microseconds and returned as aware UTC datetimes (Spark would
hand back naive local times), so rows look the same as the native engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from ..clock import from_micros
from ..rules.expr import Expr, Field
from .counts import Counts
from .dml import in_list
from .schema import QUEUE_WRITE_OPTIONS, Columns
from .spark_exprs import to_column, to_columns
from .spark_schema import spark_schema
from .statements import APP_TXN_VERSION, MESSAGE_KEY, ListedMerge, Row
from .storage import Storage
from .tables import Layout
from .transactions import ConflictCounter

T = TypeVar("T")


def collect_rows(frame: DataFrame, columns: Sequence[Field]) -> list[Row]:
    """`columns` of every row of `frame`, timestamps read exactly (as epoch microseconds)."""
    frame = frame.select(*to_columns(columns))
    times = {f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)}
    picked = [F.unix_micros(c).alias(c) if c in times else F.col(c) for c in frame.columns]
    return [
        Row({c: from_micros(v) if c in times else v for c, v in row.asDict().items()})
        for row in frame.select(*picked).collect()
    ]


def numbered_by_row_id(table: DataFrame) -> DataFrame:
    """A row-tracking FIFO table with each row's sequence number: its Delta row id."""
    return table.withColumn("sequence_number", F.col("_metadata.row_id"))


def aggregate_frame(frame: DataFrame, counts: dict[str, Expr], least: dict[str, Expr]) -> Row:
    """`Tables.aggregate` over any DataFrame: one Spark job."""
    row = frame.agg(*_aggregates(counts, least)).first()
    assert row is not None
    return Row(row.asDict())


def _aggregates(counts: dict[str, Expr], least: dict[str, Expr]) -> list[Column]:
    aggregates = [F.count(F.when(to_column(c), 1)).alias(n) for n, c in counts.items()]
    return aggregates + [F.min(to_column(value)).alias(n) for n, value in least.items()]


class SparkTables:
    """`Tables` served by Spark and Delta (classic sessions and Spark Connect alike)."""

    engine = "spark"

    def __init__(self, storage: Storage, *, interpreted: bool = True) -> None:
        """`interpreted`: on the session whose expressions are interpreted, as single-message
        statements run fastest (Storage.interpreted); False for scans at scale (the redrive
        job's)."""
        self.storage = storage.interpreted if interpreted else storage
        self.counts_known = not storage.connect

    @property
    def layout(self) -> Layout:
        return self.storage.layout

    @property
    def conflicts(self) -> ConflictCounter:
        return self.storage.conflicts

    def transact(
        self, address: str, action: Callable[[], T], what: str, *, alone: bool = False
    ) -> T:
        return self.storage.transact(address, action, what, alone=alone)

    def select(
        self,
        address: str,
        columns: Sequence[Field],
        where: Expr | None = None,
        *,
        order_by: Sequence[str | Expr] = (),
        limit: int | None = None,
        descending: bool = False,
        at: None = None,
    ) -> list[Row]:
        frame = self.storage.read(address)
        if where is not None:
            frame = frame.where(to_column(where))
        if order_by:
            keys = [to_column(key) if isinstance(key, Expr) else key for key in order_by]
            frame = frame.orderBy(*keys, ascending=not descending)
        if limit is not None:
            frame = frame.limit(limit)
        return collect_rows(frame, columns)

    def merge_changes(self, address: str, merge: ListedMerge) -> Counts:
        values = [tuple(row[name] for name, _, _ in merge.source) for row in merge.rows]
        frame = self.storage.spark.createDataFrame(values, spark_schema(merge.source))
        t = self.storage.target_prefix(address)
        on = in_list(f"{t}shard", merge.shards)
        for target, from_source in merge.keys.items():
            on = on & (F.col(f"{t}{target}") == F.col(f"s.{from_source}"))
        merger = self.storage.merge(address, frame, on)
        for condition, sets in merge.updates:
            rendered = {name: to_column(value, t) for name, value in sets.items()}
            merger = merger.update(rendered, to_column(condition, t))
        return merger.execute()

    def snapshot(self, address: str) -> AbstractContextManager[None]:
        return nullcontext()  # a Spark read resolves the table's latest version when it runs

    def aggregate(self, address: str, counts: dict[str, Expr], least: dict[str, Expr]) -> Row:
        return aggregate_frame(self.storage.read(address), counts, least)

    def aggregate_by(
        self, address: str, by: str, counts: dict[str, Expr], least: dict[str, Expr]
    ) -> dict[Any, Row]:
        grouped = self.storage.read(address).groupBy(by).agg(*_aggregates(counts, least))
        found = [Row(row.asDict()) for row in grouped.collect()]
        return {row.pop(by): row for row in found}

    def change(
        self,
        address: str,
        rows: Expr,
        values: dict[str, Expr] | None = None,
        *,
        key: tuple[str, ...] = MESSAGE_KEY,
    ) -> Counts:
        rendered = None if values is None else {n: to_column(v) for n, v in values.items()}
        return self.storage.change(address, to_column(rows), key, rendered)

    def change_where(
        self, address: str, rule: Expr, what: str, *, values: dict[str, Expr] | None = None
    ) -> int:
        return self.storage.change_where(address, rule, what, values=values)

    def append_rows(
        self,
        address: str,
        columns: Columns,
        rows: list[dict[str, Any]],
        what: str,
        *,
        app_id: str | None = None,
        within: Expr | None = None,
    ) -> None:
        names = [name for name, _, _ in columns]
        frame = self.storage.spark.createDataFrame(
            [tuple(row[n] for n in names) for row in rows], spark_schema(columns)
        )
        self.storage.append(address, frame, what, options=write_options(app_id))

    def insert_absent(
        self, address: str, columns: Columns, key: str, row: dict[str, Any]
    ) -> Counts:
        values = tuple(row[name] for name, _, _ in columns)
        source = self.storage.spark.createDataFrame([values], spark_schema(columns))
        t = self.storage.target_prefix(address)
        on = F.col(f"{t}{key}") == F.col(f"s.{key}")
        return self.storage.merge(address, source, on).insert().execute()

    def ensure_table(
        self,
        address: str,
        columns: Columns,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        self.storage.ensure_table(
            address, spark_schema(columns), partition_by=partition_by, properties=properties
        )

    def upgrade_table(self, address: str, columns: Columns) -> bool:
        return self.storage.upgrade_table(address, spark_schema(columns))

    def exists(self, address: str) -> bool:
        return self.storage.exists(address)

    def drop_table(self, address: str) -> None:
        self.storage.drop_table(address)

    def footprint(self, address: str) -> tuple[int, int]:
        detail = self.storage.detail(address).first()
        if detail is None:
            return 0, 0
        return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


def write_options(app_id: str | None) -> dict[str, str]:
    """A queue table's append options; with `app_id`, an idempotent write that Delta skips when
    the table already holds it (a move's copy, repeated after a crash)."""
    if app_id is None:
        return QUEUE_WRITE_OPTIONS
    return {**QUEUE_WRITE_OPTIONS, "txnAppId": app_id, "txnVersion": str(APP_TXN_VERSION)}

"""MERGE, UPDATE and DELETE, described once and run on either kind of Spark session.

Classic sessions run them through Delta: MERGE through its Python API, which reports row counts,
and UPDATE/DELETE through the same plans that API builds, keeping the counts it drops. Spark Connect
sessions (Databricks serverless and shared clusters) run them through Spark's own
`DataFrame.mergeInto`, which needs nothing on the server but Delta's SQL extension and reports no
counts. Either way the caller gets `Counts`, which says plainly when the numbers are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .classic import counted_dml
from .counts import UNKNOWN, Counts
from .tables import Table

_KEY = "__sparkqueue_key_"  # the key columns of `change`'s MERGE source


def in_list(column: str, values: list[int] | list[str]) -> Column:
    """A literal IN predicate, the form Delta's conflict checker can use to prune partitions."""
    return F.col(column).isin(sorted(set(values)))


@dataclass
class Merge:
    """One MERGE into `table` from `source` (aliased `s`); target columns named by table.prefix."""

    spark: SparkSession
    connect: bool
    table: Table
    source: DataFrame
    on: Column
    clauses: list[tuple[str, Column | None, dict[str, Column] | None]] = field(default_factory=list)

    def update(self, values: dict[str, Column], condition: Column | None = None) -> Merge:
        self.clauses.append(("update", condition, values))
        return self

    def delete(self, condition: Column | None = None) -> Merge:
        self.clauses.append(("delete", condition, None))
        return self

    def insert(self, values: dict[str, Column] | None = None) -> Merge:
        """Inserts unmatched source rows: `values`, or every column when None."""
        self.clauses.append(("insert", None, values))
        return self

    def execute(self) -> Counts:
        if self.connect:
            self._spark_merge()
            return UNKNOWN
        target = self.table.delta(self.spark).alias(self.table.alias)
        builder = target.merge(self.source.alias("s"), self.on)
        for kind, condition, values in self.clauses:
            if kind == "update":
                builder = builder.whenMatchedUpdate(condition=condition, set=values)
            elif kind == "delete":
                builder = builder.whenMatchedDelete(condition=condition)
            elif kind == "insert" and values is None:
                builder = builder.whenNotMatchedInsertAll()
            else:
                builder = builder.whenNotMatchedInsert(values=values)
        row = builder.execute().first()
        metrics = {key: int(value or 0) for key, value in row.asDict().items()} if row else {}
        return Counts(
            known=True,
            updated=metrics.get("num_updated_rows", 0),
            deleted=metrics.get("num_deleted_rows", 0),
            inserted=metrics.get("num_inserted_rows", 0),
        )

    def _spark_merge(self) -> None:
        writer = self.source.alias("s").mergeInto(self.table.sql, self.on)
        for kind, condition, values in self.clauses:
            if kind == "update":
                writer = writer.whenMatched(condition).update(values)
            elif kind == "delete":
                writer = writer.whenMatched(condition).delete()
            elif kind == "insert" and values is None:
                writer = writer.whenNotMatched().insertAll()
            else:
                writer = writer.whenNotMatched().insert(values)
        writer.merge()


def change(
    spark: SparkSession,
    connect: bool,
    table: Table,
    rows: Column,
    key: tuple[str, ...],
    values: dict[str, Column] | None,
) -> Counts:
    """UPDATE (or, without `values`, DELETE) the rows meeting `rows`; what the commit changed.

    On a classic session this is Delta's own UPDATE/DELETE, counted (see classic.py). Spark
    Connect has no UPDATE/DELETE API but `mergeInto`: there it is a MERGE of the rows' `key`
    columns into the table, which reports no counts.
    """
    if not connect:
        return counted_dml(spark, table, rows, values)
    source = table.read(spark).where(rows)
    keys = source.select([F.col(k).alias(f"{_KEY}{k}") for k in key])
    on = reduce(Column.__and__, [F.col(k) == F.col(f"{_KEY}{k}") for k in key], rows)
    merge = Merge(spark, connect, table, keys, on)
    return (merge.delete() if values is None else merge.update(values)).execute()

"""The Spark rendering of rules/expr.py: each expression as a pyspark `Column`.

Literals become `F.lit` values inside the plan, never SQL text. `prefix` qualifies every column,
so one rule serves a plain read (`""`) and a MERGE's target (`Storage.target_prefix`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..rules.expr import Call, Case, Col, Expr, Field, Lit, Named, SourceCol
from .transactions import STALE_READ_MARKER

_TYPES = {
    "string": "string",
    "int": "int",
    "long": "long",
    "timestamp": "timestamp",
    "map": "map<string,string>",
}
_BINARY: dict[str, Callable[[Column, Column], Column]] = {
    "and": Column.__and__,
    "or": Column.__or__,
    "==": Column.__eq__,  # type: ignore[dict-item]
    "!=": Column.__ne__,  # type: ignore[dict-item]
    "<=": Column.__le__,
    "<": Column.__lt__,
    ">=": Column.__ge__,
    ">": Column.__gt__,
    "+": Column.__add__,
    "-": Column.__sub__,
    "%": Column.__mod__,
}
_UNARY: dict[str, Callable[[Column], Column]] = {
    "not": Column.__invert__,
    "is_null": Column.isNull,
    "micros": F.unix_micros,
    "timestamp_of_micros": F.timestamp_micros,
    "as_string": lambda value: value.cast("string"),
    "sha256_hex": lambda text: F.sha2(text, 256),
}


def to_column(expr: Expr, prefix: str = "") -> Column:
    """`expr` as a Spark Column, its columns named `<prefix><name>`."""
    if isinstance(expr, Col):
        return F.col(f"{prefix}{expr.name}")
    if isinstance(expr, SourceCol):
        return F.col(f"s.{expr.name}")
    if isinstance(expr, Lit):
        return _literal(expr)
    if isinstance(expr, Case):
        chosen: Column | None = None
        for condition, value in expr.branches:
            when, then = to_column(condition, prefix), to_column(value, prefix)
            chosen = F.when(when, then) if chosen is None else chosen.when(when, then)
        assert chosen is not None
        return chosen.otherwise(to_column(expr.otherwise, prefix))
    assert isinstance(expr, Call), expr
    args = [to_column(arg, prefix) for arg in expr.args]
    if expr.op in _BINARY:
        return reduce(_BINARY[expr.op], args)
    if expr.op in _UNARY:
        return _UNARY[expr.op](args[0])
    if expr.op == "in":
        return args[0].isin([_value(arg) for arg in expr.args[1:]])
    if expr.op == "coalesce":
        return F.coalesce(*args)
    if expr.op == "starts_with":
        return args[0].startswith(_value(expr.args[1]))
    if expr.op == "concat_ws":
        return F.concat_ws(str(_value(expr.args[0])), *args[1:])
    if expr.op == "unless_stale":
        return unless_stale_column(args[0], args[1])
    if expr.op == "prefix":
        return F.substring(args[0], 1, int(_value(expr.args[1])))  # type: ignore[arg-type]
    if expr.op == "after_last":
        return F.substring_index(args[0], str(_value(expr.args[1])), -1)
    raise ValueError(f"no Spark rendering for {expr.op!r}")


def to_columns(fields: Sequence[Field]) -> list[Column]:
    """A select's fields as Spark Columns: a name as its column, a `Named` computed under it."""
    return [
        to_column(field.value).alias(field.name) if isinstance(field, Named) else F.col(field)
        for field in fields
    ]


def unless_stale_column(still_valid: Column, value: Column) -> Column:
    """`value` while the row is as a claim read it; otherwise the whole statement fails
    uncommitted, and its transaction runs again on a fresh read (see engine/fifo/spark.py)."""
    return F.when(still_valid, value).otherwise(F.raise_error(F.lit(STALE_READ_MARKER)))


def _literal(expr: Lit) -> Column:
    if expr.value is None:
        return F.lit(None).cast(_TYPES[expr.type or "string"])
    if isinstance(expr.value, datetime):
        return F.lit(expr.value)
    value = F.lit(expr.value)
    return value.cast(_TYPES[expr.type]) if expr.type else value


def _value(expr: Expr) -> object:
    assert isinstance(expr, Lit), "IN lists, prefixes and separators are literals"
    return expr.value

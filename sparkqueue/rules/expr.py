"""Row conditions and new values as plain values, so each rule is written once for both engines.

A rule (claimable now, holds this handle, within the 12-hour ceiling...) is an `Expr` tree built
from columns, literals and a few functions. The storage layer renders it: into a Spark `Column`
for the Spark engine (store/spark_exprs.py) and into DataFusion SQL text for the native engine
(store/native_sql.py), where every literal is rendered and escaped by the renderer, never pasted.
Operators read as in pyspark: `&`, `|`, `~`, `==`, `!=`, `<=`, `<`, `>`, `>=`, `+`, `-`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import Any

Value = str | int | bool | datetime | None
# The few types a typed null or a cast names; each renderer maps them to its own type names.
TYPES = ("string", "int", "long", "timestamp", "map")


@dataclass(frozen=True, eq=False)
class Expr:
    """A node of an expression tree (equality builds a comparison, as pyspark's Column does)."""

    def __and__(self, other: Expr) -> Expr:
        return Call("and", (self, other))

    def __or__(self, other: Expr) -> Expr:
        return Call("or", (self, other))

    def __invert__(self) -> Expr:
        return Call("not", (self,))

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Call("==", (self, _expr(other)))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Call("!=", (self, _expr(other)))

    def __le__(self, other: object) -> Expr:
        return Call("<=", (self, _expr(other)))

    def __lt__(self, other: object) -> Expr:
        return Call("<", (self, _expr(other)))

    def __ge__(self, other: object) -> Expr:
        return Call(">=", (self, _expr(other)))

    def __gt__(self, other: object) -> Expr:
        return Call(">", (self, _expr(other)))

    def __add__(self, other: object) -> Expr:
        return Call("+", (self, _expr(other)))

    def __sub__(self, other: object) -> Expr:
        return Call("-", (self, _expr(other)))

    def __mod__(self, other: object) -> Expr:
        return Call("%", (self, _expr(other)))

    __hash__ = object.__hash__

    def isin(self, values: list[Any] | set[Any]) -> Expr:
        """A literal IN list (sorted, without repeats): the form both engines' conflict checks
        can use to prune partitions."""
        return Call("in", (self, *(Lit(v) for v in sorted(set(values)))))

    def is_null(self) -> Expr:
        return Call("is_null", (self,))

    def is_not_null(self) -> Expr:
        return Call("not", (Call("is_null", (self,)),))

    def starts_with(self, prefix: str) -> Expr:
        return Call("starts_with", (self, Lit(prefix)))


@dataclass(frozen=True, eq=False)
class Col(Expr):
    """A column of the table the statement reads or changes."""

    name: str


@dataclass(frozen=True, eq=False)
class SourceCol(Expr):
    """A column of a MERGE's source (aliased `s`), beside the target's own columns."""

    name: str


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    """A literal value; `type` gives a null its type."""

    value: Value
    type: str | None = None

    def __post_init__(self) -> None:
        if self.type is not None and self.type not in TYPES:
            raise ValueError(f"unknown type {self.type!r}; one of {TYPES}")


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """An operator or function applied to its arguments (the renderers know every `op`)."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Case(Expr):
    """The value of the first branch whose condition holds, else `otherwise`."""

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr


@dataclass(frozen=True)
class Named:
    """A column a read computes, under `name` (a select's `AS`)."""

    name: str
    value: Expr


# What a read selects: a column by its name, or a computed one.
Field = str | Named


def _expr(value: object) -> Expr:
    return value if isinstance(value, Expr) else Lit(value)  # type: ignore[arg-type]


def col(name: str) -> Col:
    return Col(name)


def source(name: str) -> SourceCol:
    return SourceCol(name)


def lit(value: Value, type: str | None = None) -> Lit:
    return Lit(value, type)


def null(type: str) -> Lit:
    """A null of `type` (an UPDATE setting a column to null names the column's type)."""
    return Lit(None, type)


def all_of(conditions: list[Expr]) -> Expr:
    return reduce(Expr.__and__, conditions)


def any_of(conditions: list[Expr]) -> Expr:
    return reduce(Expr.__or__, conditions)


def coalesce(*values: Expr) -> Expr:
    return Call("coalesce", values)


def micros(timestamp: Expr) -> Expr:
    """A timestamp as microseconds since the epoch (exact in both engines)."""
    return Call("micros", (timestamp,))


def timestamp_of_micros(value: Expr) -> Expr:
    return Call("timestamp_of_micros", (value,))


def as_string(value: Expr) -> Expr:
    return Call("as_string", (value,))


def concat_ws(separator: str, *parts: Expr) -> Expr:
    return Call("concat_ws", (Lit(separator), *parts))


def sha256_hex(text: Expr) -> Expr:
    """The SHA-256 of the UTF-8 text, as 64 lower-case hex digits."""
    return Call("sha256_hex", (text,))


def prefix(text: Expr, length: int) -> Expr:
    """The first `length` characters of the text."""
    return Call("prefix", (text, Lit(length)))


def after_last(text: Expr, separator: str) -> Expr:
    """What follows the last `separator` in the text (all of it when there is none)."""
    return Call("after_last", (text, Lit(separator)))


def when(branches: list[tuple[Expr, Expr]], otherwise: Expr) -> Expr:
    return otherwise if not branches else Case(tuple(branches), otherwise)

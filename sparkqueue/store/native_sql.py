"""The native rendering of rules/expr.py: each expression as DataFusion SQL text for delta-rs.

delta-rs takes predicates and new values as SQL text, so this is the one place where literals
become text: strings are quoted with inner quotes doubled, numbers formatted from ints, instants
written as exact epoch microseconds, and column names quoted. Nothing else in the package writes
SQL for delta-rs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..clock import to_micros
from ..rules.expr import Call, Case, Col, Expr, Field, Lit, Named, SourceCol
from .transactions import STALE_READ_MARKER

TIMESTAMP = 'Timestamp(Microsecond, Some("UTC"))'
_TYPES = {"string": "VARCHAR", "int": "INT", "long": "BIGINT"}
_INFIX = {"and": "AND", "or": "OR", "==": "=", "!=": "<>", "<=": "<=", "<": "<", ">=": ">=",
          ">": ">", "+": "+", "-": "-", "%": "%"}  # fmt: skip


def to_sql(expr: Expr) -> str:
    """`expr` as a DataFusion SQL expression."""
    if isinstance(expr, Col):
        return quote_name(expr.name)
    if isinstance(expr, SourceCol):
        return f"s.{quote_name(expr.name)}"
    if isinstance(expr, Lit):
        return literal(expr)
    if isinstance(expr, Case):
        branches = " ".join(f"WHEN {to_sql(c)} THEN {to_sql(v)}" for c, v in expr.branches)
        return f"CASE {branches} ELSE {to_sql(expr.otherwise)} END"
    assert isinstance(expr, Call), expr
    args = [to_sql(arg) for arg in expr.args]
    op = expr.op
    if op in _INFIX:
        return "(" + f" {_INFIX[op]} ".join(args) + ")"
    if op == "not":
        return f"(NOT {args[0]})"
    if op == "is_null":
        return f"({args[0]} IS NULL)"
    if op == "in":  # an empty list matches nothing, as Spark's isin([]) (SQL has no `IN ()`)
        return f"({args[0]} IN ({', '.join(args[1:])}))" if args[1:] else "FALSE"
    if op == "micros":
        return f"arrow_cast({args[0]}, 'Int64')"
    if op == "timestamp_of_micros":
        return f"arrow_cast({args[0]}, '{TIMESTAMP}')"
    if op == "as_string":
        return f"CAST({args[0]} AS VARCHAR)"
    if op == "sha256_hex":
        return f"encode(sha256({args[0]}), 'hex')"
    if op == "prefix":
        return f"substr({args[0]}, 1, {args[1]})"
    if op == "after_last":
        return f"substr_index({args[0]}, {args[1]}, -1)"
    if op == "unless_stale":  # a failed cast fails the statement, and names our guard
        fail = f"CAST(CAST(concat({quote_text(STALE_READ_MARKER + ': ')}, {quote_name('message_id')}) AS INT) AS VARCHAR)"
        return f"CASE WHEN {args[0]} THEN {args[1]} ELSE {fail} END"
    if op in ("coalesce", "starts_with", "concat_ws"):
        return f"{op}({', '.join(args)})"
    raise ValueError(f"no SQL rendering for {op!r}")


def literal(expr: Lit) -> str:
    value = expr.value
    if value is None:  # typed by where it goes (an UPDATE casts it to the column's type)
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        text = str(int(value))
        return f"CAST({text} AS {_TYPES[expr.type]})" if expr.type in _TYPES else text
    if isinstance(value, datetime):
        return f"arrow_cast({to_micros(value)}, '{TIMESTAMP}')"
    if isinstance(value, str):
        return quote_text(value)
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def quote_text(text: str) -> str:
    """A SQL string literal: single quotes, inner ones doubled; no NUL (DataFusion ends there)."""
    if "\x00" in text:
        raise ValueError("a SQL string literal cannot hold NUL")
    return "'" + text.replace("'", "''") + "'"


def quote_name(name: str) -> str:
    """A column name as DataFusion reads it: double-quoted, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _selected(field: Field) -> str:
    if isinstance(field, Named):
        return f"{to_sql(field.value)} AS {quote_name(field.name)}"
    return quote_name(field)


def aggregate_list(counts: dict[str, Expr], least: dict[str, Expr]) -> str:
    """The select list of `Tables.aggregate`: a count per condition, a least value per expression."""
    parts = [
        f"COUNT(CASE WHEN {to_sql(c)} THEN 1 END) AS {quote_name(n)}" for n, c in counts.items()
    ]
    parts += [f"MIN({to_sql(value)}) AS {quote_name(n)}" for n, value in least.items()]
    return ", ".join(parts)


def select_statement(
    columns: Sequence[Field],
    where: Expr | None = None,
    order_by: Sequence[str | Expr] = (),
    limit: int | None = None,
    descending: bool = False,
) -> str:
    """A DataFusion SELECT over the table `t` from the rules' expressions."""
    statement = f"SELECT {', '.join(map(_selected, columns))} FROM t"
    if where is not None:
        statement += f" WHERE {to_sql(where)}"
    if order_by:
        keys = [to_sql(c) if isinstance(c, Expr) else quote_name(c) for c in order_by]
        direction = " DESC" if descending else ""
        statement += f" ORDER BY {', '.join(key + direction for key in keys)}"
    if limit is not None:
        statement += f" LIMIT {int(limit)}"
    return statement

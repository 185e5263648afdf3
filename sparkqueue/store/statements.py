"""What the per-message path asks of a queue's tables, whichever engine serves them.

`Tables` is implemented twice: by Spark (spark_tables.py, on the broker's interpreting session)
and natively by delta-rs (native_tables.py). Both take the same rule expressions (rules/expr.py),
return the same `Row`s (timestamps as aware UTC datetimes, maps as dicts) and the same `Counts`,
and run every read-check-commit operation through `transact` (the local root's commit lock and
the conflict retries both engines share).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..rules.expr import Expr, Field
from .counts import Counts
from .schema import Columns
from .tables import Layout
from .transactions import ConflictCounter

T = TypeVar("T")
MESSAGE_KEY = ("shard", "message_id")
APP_TXN_VERSION = 1  # an idempotent write's app id is written once (in either engine)


class Row(dict[str, Any]):
    """One row read from a table: by name as an attribute or an item."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class ListedMerge:
    """A MERGE from listed rows of `source`'s columns (named apart from the table's; expressions
    name them with `SourceCol`): each target column of `keys` matched to its source column, on
    literal `shards`; a matched row takes the first of `updates` whose condition holds. One
    source row per target row: both engines fail a MERGE where two meet one."""

    source: Columns
    rows: list[dict[str, Any]]
    keys: dict[str, str]
    shards: list[int]
    updates: list[tuple[Expr, dict[str, Expr]]]


class Tables(Protocol):
    """Reads and commits on a broker's tables through one engine."""

    engine: str  # "spark" or "native"
    counts_known: bool  # whether `change` and `insert_absent` report what they changed

    @property
    def layout(self) -> Layout: ...

    @property
    def conflicts(self) -> ConflictCounter: ...

    def transact(
        self, address: str, action: Callable[[], T], what: str, *, alone: bool = False
    ) -> T:
        """Runs one read-check-commit `action`, retried whole on commit conflicts."""
        ...

    def select(
        self,
        address: str,
        columns: Sequence[Field],
        where: Expr | None = None,
        *,
        order_by: Sequence[str | Expr] = (),
        limit: int | None = None,
        descending: bool = False,
        at: Any = None,
    ) -> list[Row]:
        """The rows meeting `where`, with `columns`, in `order_by` order (columns or
        expressions, each one's largest first when `descending`), at most `limit`; `at`: a `snapshot` to read."""
        ...

    def snapshot(self, address: str) -> AbstractContextManager[Any]:
        """The table as it is now, for the reads within the `with` block to see alike and to
        open once; it yields None where an engine's every read sees the latest (Spark's)."""
        ...

    def merge_changes(self, address: str, merge: ListedMerge) -> Counts:
        """One MERGE from `merge.rows` (see ListedMerge); what it updated."""
        ...

    def aggregate(self, address: str, counts: dict[str, Expr], least: dict[str, Expr]) -> Row:
        """One scan: per name, how many rows meet a condition, or the least value of an
        expression (None on no rows)."""
        ...

    def aggregate_by(
        self, address: str, by: str, counts: dict[str, Expr], least: dict[str, Expr]
    ) -> dict[Any, Row]:
        """`aggregate` for each value of the column `by` (None for null) the table holds: one
        scan."""
        ...

    def change(
        self,
        address: str,
        rows: Expr,
        values: dict[str, Expr] | None = None,
        *,
        key: tuple[str, ...] = MESSAGE_KEY,
    ) -> Counts:
        """UPDATE (or, without `values`, DELETE) the rows meeting `rows`, within the caller's
        transaction; `key` identifies a row where an engine must join to change it."""
        ...

    def change_where(
        self, address: str, rule: Expr, what: str, *, values: dict[str, Expr] | None = None
    ) -> int:
        """Its own transaction: UPDATE (None: DELETE) every queue row meeting `rule`, under a
        literal predicate on the shards holding such rows (so it conflicts only there); how
        many rows it changed."""
        ...

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
        """A blind append of whole rows (every column of the table's schema), one commit; with
        `app_id`, once: a repeat finds the table holding that id and appends nothing.

        `within`: a condition every row meets that few rows already in the table do (their
        shards and the range of their new ids). delta-rs 1.6 counts an append as a read of the
        whole table, so a claim or a delete committed while the rows were written fails it, and
        it is written again; bounded, it conflicts only with commits that added or removed files
        whose statistics may meet it. Spark's appends are blind already and ignore it."""
        ...

    def insert_absent(
        self, address: str, columns: Columns, key: str, row: dict[str, Any]
    ) -> Counts:
        """Inserts `row` unless a row with its `key` value exists, as one conflict-checked
        commit (a MERGE): two callers inserting one key never both succeed."""
        ...

    def ensure_table(
        self,
        address: str,
        columns: Columns,
        *,
        partition_by: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
    ) -> None:
        """Creates the table with `columns` unless it exists (once per process and table)."""
        ...

    def upgrade_table(self, address: str, columns: Columns) -> bool:
        """Gives an existing table the nullable columns it lacks; False when there is none."""
        ...

    def exists(self, address: str) -> bool: ...

    def drop_table(self, address: str) -> None: ...

    def footprint(self, address: str) -> tuple[int, int]:
        """The table's live data files and their bytes (the redrive job's metrics)."""
        ...

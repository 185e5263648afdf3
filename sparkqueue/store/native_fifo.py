"""FIFO tables the native engine numbers itself: sequence numbers without Delta row tracking.

A FIFO queue created by the native engine keeps each message's sequence number in the
`sequence_number` column (Spark's FIFO tables use Delta row ids instead, which delta-rs cannot
write). Rows enter such a table through `append_in_sequence` alone, whichever engine's caller
sends or moves them. The append is one MERGE that inserts the rows into their groups' shards;
it commits at exactly the version after its snapshot or not at all (no delta-rs retries at a
later version: a commit in between fails it, and the caller's transaction runs again on a fresh
snapshot), and each row's number is `(that version) << 32` plus its position in the call. So:

- Numbers are unique and follow commit order across the whole table: a row committed later has
  a larger number than every row already there. A reader sees each group as a prefix of its
  send order (a receive never hands out a message and later finds an earlier one of its group),
  and deduplication, which keeps the first accepted send of an id in number order, keeps the
  send that committed first, whatever groups the two went to: what `send` told each caller
  when it read back stays true.
- On a local root the append holds the table's commit lock alone (no other transaction on the
  table in flight, in this process or another: see locking.py), so it does not lose that race
  to the queue's own consumers; concurrent appends take turns. On object storage it holds the
  table alone among this process's threads (`locking.table_lock`); other processes' commits can
  still win the version, and the append then runs again on a fresh snapshot.

Its MERGE also reads its shards (a literal `shard IN (...)`), so delta-rs would reject it for
any commit that added files there even if the version check allowed it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from deltalake import DeltaTable

from ..rules.deduplication import DEDUPLICATION_COLUMNS
from ..rules.expr import Expr, col
from ..rules.handles import MOVE_MARKER_PREFIX
from .native_arrow import arrow_table
from .native_commits import NO_HOOKS, after_commit, applied, applying, commit_once, metric
from .native_sql import quote_name, quote_text, to_sql
from .native_tables import NativeTables
from .schema import Columns
from .statements import Row

SEQUENCE_SHIFT = 32  # positions within one append (up to 4 billion rows) below the version
ORDER_COLUMNS = ("group_id", "sequence_number", "message_id")  # what prefixes are ordered by
# How group prefixes are ordered, groups first (each group's rows then in sequence order):
# - FULLEST: the longest prefix first, as SQS returns as many messages of one group as it can,
#   counted up to what the receive takes (every group that could fill it alone ranks alike);
#   groups that rank alike in an order shuffled by each receive's salt, so concurrent receivers
#   start on different groups and a big group does not draw them all (a receive);
# - OLDEST: by each group's head, the oldest first, so a limit takes the same rows in every
#   engine (a move).
FULLEST, OLDEST = "fullest", "oldest"
GROUP_ORDERS = (FULLEST, OLDEST)
_ORDER_SQL = {FULLEST: "LEAST(_size, {limit}) DESC, _shuffled", OLDEST: "_head"}


def home_shard(group_id: str, shards: int) -> int:
    """The shard of a group's messages: one per group, so a group's order is one shard's."""
    digest = hashlib.sha256(group_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def append_in_sequence(
    tables: NativeTables,
    address: str,
    columns: Columns,
    rows: list[dict[str, Any]],
    what: str,
    *,
    app_id: str | None = None,
) -> list[int] | None:
    """Inserts `rows` (whole rows, each with its group's `shard`) numbered in list order, in one
    conflict-checked commit; returns their sequence numbers. With `app_id`, the commit records it
    and an append whose id a table already holds is skipped (None): a repeated move copies once.
    """
    shards = sorted({int(row["shard"]) for row in rows})
    # A row of the same id being moved out of this table (its copy here not yet dropped: a move
    # back overtook a crash between copy and drop) does not stand in the way; its own move's
    # drop step removes it, and the message is here once.
    moving_out = f"starts_with(t.receipt_handle, {quote_text(MOVE_MARKER_PREFIX)})"
    on = (
        f"t.shard IN ({', '.join(map(str, shards))}) AND t.shard = s.shard"
        f" AND t.message_id = s.message_id AND NOT coalesce({moving_out}, FALSE)"
    )
    tried = False  # whether an attempt reached its commit (a put may land after its answer)

    def attempt() -> list[int] | None:
        nonlocal tried
        table = tables.open(address)
        if app_id is not None and applied(table, app_id):
            return None
        if tried and app_id is None:
            landed = _landed(tables, address, rows, table)
            if landed is not None:
                return landed
        tried = True
        before = table.version()
        base = (before + 1) << SEQUENCE_SHIFT
        numbered = [{**row, "sequence_number": base + i} for i, row in enumerate(rows)]
        source = arrow_table(numbered, columns)
        committed = commit_once(
            table,
            tables.reopener(address),
            lambda mark: (
                table.merge(
                    source,
                    on,
                    source_alias="s",
                    target_alias="t",
                    # exactly the next version or nothing: the numbers above are that version's
                    commit_properties=applying(mark, app_id, retries=0),
                    post_commithook_properties=NO_HOOKS,
                )
                .when_not_matched_insert_all()
                .execute()
            ),
        )
        after_commit(table, before)
        inserted = metric(committed.metrics, "num_target_rows_inserted")
        # Only a message id already in its shard (and not on its way out) is skipped, and ids
        # are new (sends) or leave their source only after this append (moves, whose repeats
        # the app id skips): never expected, but never hidden either.
        if inserted != len(rows):
            raise RuntimeError(f"{what}: {len(rows)} rows to append, {inserted} inserted")
        return [row["sequence_number"] for row in numbered]

    return tables.transact(address, attempt, what, alone=True)


def _landed(
    tables: NativeTables, address: str, rows: list[dict[str, Any]], table: DeltaTable
) -> list[int] | None:
    """The sequence numbers of a send whose earlier attempt committed although its caller was
    told otherwise: its answer was lost, its mark was not in the log yet, and the put landed
    after that (object storage); None when that attempt did not land. A
    send's message ids are new, so finding them means that commit; a commit is whole, so finding
    only some of them cannot be it. Every shard is read: a consumer may have received and
    deleted one meanwhile, leaving its tombstone (same id and number) in a shard of their own."""
    ids = [row["message_id"] for row in rows]
    where = col("message_id").isin(ids)
    found = {
        row.message_id: row.sequence_number
        for row in tables.select(address, ["message_id", "sequence_number"], where, at=table)
    }
    if not found:
        return None
    if len(found) != len(ids):
        raise RuntimeError(
            f"{len(found)} of a send's {len(ids)} new message ids are in {address}: no commit"
            " writes part of itself"
        )
    return [found[message_id] for message_id in ids]


def deduplication_history(
    tables: NativeTables,
    address: str,
    deduplication_ids: Sequence[str] | None = None,
    *,
    at: DeltaTable | None = None,
) -> list[Row]:
    """The rows (tombstones included) that deduplication judges: those with the given ids, or
    else every row whose id more than one row carries (only those can be duplicates); on the
    latest snapshot or the one `at` holds."""
    name = quote_name("deduplication_id")
    if deduplication_ids is None:
        wanted = (
            f"{name} IN (SELECT {name} FROM t WHERE {name} IS NOT NULL"
            f" GROUP BY {name} HAVING COUNT(*) > 1)"
        )
    elif not deduplication_ids:
        return []
    else:
        wanted = f"{name} IN ({', '.join(map(quote_text, deduplication_ids))})"
    names = ", ".join(map(quote_name, DEDUPLICATION_COLUMNS))
    return tables.query(address, f"SELECT {names} FROM t WHERE {wanted}", at=at)


def shards_holding(
    tables: NativeTables, address: str, where: Expr, *, at: DeltaTable | None = None
) -> list[int]:
    """The shards holding rows that meet `where`."""
    statement = f"SELECT DISTINCT {quote_name('shard')} AS shard FROM t WHERE {to_sql(where)}"
    return [row.shard for row in tables.query(address, statement, at=at)]


def last_sequence(
    tables: NativeTables, address: str, *, at: DeltaTable | None = None
) -> int | None:
    """The highest sequence number in the table (None: no rows)."""
    statement = f"SELECT MAX({quote_name('sequence_number')}) AS last FROM t"
    return tables.query(address, statement, at=at)[0]["last"]


def group_prefixes(
    tables: NativeTables,
    address: str,
    columns: Sequence[str],
    *,
    living: Expr,
    ok: Expr,
    held: Expr,
    order: str,
    limit: int,
    salt: str = "",
    at: DeltaTable | None = None,
) -> list[Row]:
    """Up to `limit` rows a FIFO receive (or move) may take (DataFusion's rendering of
    engine/fifo/spark.py's `deliverable`): among `living` rows, each group with no `held` row gives its
    `ok` rows up to its first row that is not; groups in `order` (GROUP_ORDERS), each in sequence
    order, so any limit keeps them prefixes."""
    names = ", ".join(map(quote_name, columns))
    inner = ", ".join(map(quote_name, dict.fromkeys([*columns, *ORDER_COLUMNS])))
    group, sequence = quote_name("group_id"), quote_name("sequence_number")
    statement = f"""
        SELECT {names} FROM (
            SELECT {inner}, COUNT(*) OVER (PARTITION BY {group}) AS _size,
                MIN({sequence}) OVER (PARTITION BY {group}) AS _head,
                encode(sha256(concat({group}, {quote_text(salt)})), 'hex') AS _shuffled
            FROM (
                SELECT {inner}, {to_sql(ok)} AS _ok,
                    MAX(CASE WHEN {to_sql(held)} THEN 1 ELSE 0 END)
                        OVER (PARTITION BY {group}) AS _blocked,
                    MIN(CASE WHEN NOT {to_sql(ok)} THEN {sequence} END)
                        OVER (PARTITION BY {group}) AS _stop
                FROM t WHERE {to_sql(living)}
            ) WHERE _ok AND _blocked = 0 AND (_stop IS NULL OR {sequence} < _stop)
        ) ORDER BY {_ORDER_SQL[order].format(limit=int(limit))}, {group}, {sequence},
            {quote_name("message_id")}
        LIMIT {int(limit)}"""
    return tables.query(address, statement, at=at)

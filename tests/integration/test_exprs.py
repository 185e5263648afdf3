"""One table of rule cases, evaluated by both renderings: Spark Columns and delta-rs's SQL give the
same value for every rule on every row (and the handle the engines compute is Python's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from sparkqueue.attributes import QueueAttributes
from sparkqueue.engine import conditions
from sparkqueue.engine.messages.visibility import within_ceiling
from sparkqueue.rules import handles
from sparkqueue.rules.expr import (
    as_string,
    coalesce,
    col,
    concat_ws,
    lit,
    micros,
    null,
    timestamp_of_micros,
    when,
)
from sparkqueue.store.native_sql import to_sql
from sparkqueue.store.schema import MESSAGE_COLUMNS
from sparkqueue.store.spark_exprs import to_column

from .helpers import rows_table

NOW = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)
ATTRS = QueueAttributes(dead_letter_queue="dlq", max_receive_count=3, retention_seconds=3600)
SECRET, TOKEN = "s3cret", "t0ken"


def _row(message_id: str, **values: object) -> dict[str, object]:
    row = {name: None for name, _, _ in MESSAGE_COLUMNS}
    row.update(shard=1, message_id=message_id, body="b", sent_at=NOW, visible_at=NOW)
    row.update(receive_count=0, attributes=[])
    row.update(values)
    return row


ROWS = [
    _row("00000000-0000-7000-8000-000000000001"),
    _row("00000000-0000-7000-8000-000000000002", visible_at=NOW + timedelta(seconds=1)),
    _row(
        "00000000-0000-7000-8000-000000000003",
        receipt_handle="1.x.y.z",
        receive_count=3,
        handle_issued_at=NOW - timedelta(hours=11),
    ),
    _row("00000000-0000-7000-8000-000000000004", receipt_handle="moving:abc:q", shard=2),
    _row("00000000-0000-7000-8000-000000000005", sent_at=NOW - timedelta(hours=2)),
    _row("00000000-0000-7000-8000-000000000006", shard=-1, first_received_at=NOW),
]

CASES = {
    "claimable": conditions.claimable(NOW, ATTRS),
    "alive": conditions.alive(NOW, ATTRS),
    "being_moved": conditions.being_moved(),
    "in_flight": conditions.in_flight(NOW),
    "expired_in_flight": conditions.expired_in_flight(NOW),
    "awaiting": conditions.awaiting_dead_letter(ATTRS),
    "past_retention": conditions.past_retention(NOW, ATTRS),
    "spent_tombstone": conditions.spent_tombstone(NOW),
    "within_ceiling": within_ceiling(lit(NOW + timedelta(hours=1)), col("handle_issued_at")),
    "tombstone_until": micros(conditions.tombstone_values()["visible_at"]),
    "handle": handles.issue_expr(SECRET, TOKEN, col("shard"), col("message_id")),
    "as_read": concat_ws(":", col("message_id"), as_string(col("receive_count"))),
    "first": micros(coalesce(col("first_received_at"), lit(NOW))),
    "case": when([(col("shard") == 2, lit("two")), (col("shard") < 0, lit("dead"))], lit("one")),
    "in_list": col("shard").isin([2, -1]),
    "back": micros(timestamp_of_micros(micros(col("sent_at")) + 5)),
    "typed_null": coalesce(null("string"), col("receipt_handle")),
}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    return rows_table(tmp_path_factory.mktemp("exprs"), ROWS)


def test_both_renderings_agree_on_every_rule_and_row(spark, table):
    order = "message_id"
    native = pa.table(
        QueryBuilder()
        .register("t", DeltaTable(table))
        .execute(
            "SELECT "
            + ", ".join(f"{to_sql(expr)} AS {name}" for name, expr in CASES.items())
            + f" FROM t ORDER BY {order}"
        )
    ).to_pylist()
    frame = spark.read.format("delta").load(table).orderBy(order)
    by_spark = [
        row.asDict()
        for row in frame.select(*(to_column(e).alias(n) for n, e in CASES.items())).collect()
    ]
    assert by_spark == native
    assert [row["handle"] for row in native] == [
        handles.issue(SECRET, TOKEN, row["shard"], row["message_id"]) for row in ROWS
    ]
    # and the rules say what they mean on these rows
    assert [row["claimable"] for row in native] == [True, False, False, False, False, False]
    assert [row["being_moved"] for row in native] == [False, False, False, True, False, False]

"""FIFO queues across both engines: one rule rendered twice (deduplication, group prefixes) agrees
on one table; Spark's callers (`send_df`, `receive_df`, the redrive job, moves) share a FIFO
queue the native engine numbers with native ones; and FIFO tables Spark numbers by row tracking
keep working."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.attributes import QueueAttributes
from sparkqueue.engine.conditions import alive, claimable, due, in_flight
from sparkqueue.engine.fifo import spark as spark_fifo
from sparkqueue.engine.messages import inspect, send
from sparkqueue.engine.moves.frames import Mover
from sparkqueue.errors import UnsupportedOperation
from sparkqueue.rules.deduplication import DEDUPLICATION_COLUMNS, accepted_originals, duplicates
from sparkqueue.rules.expr import Expr, col
from sparkqueue.store.native_fifo import FULLEST, OLDEST, deduplication_history, group_prefixes
from sparkqueue.store.native_tables import NativeTables
from sparkqueue.store.schema import MESSAGE_COLUMNS
from sparkqueue.store.tables import PathLayout
from sparkqueue.store.transactions import RetryPolicy

from .helpers import rows_table, run_threads

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
ATTRS = QueueAttributes(fifo=True, dead_letter_queue="dead.fifo", max_receive_count=3)


def _row(n: int, sequence: int, dedup: str, group: str, **values: object) -> dict:
    row = {name: None for name, _, _ in MESSAGE_COLUMNS}
    row.update(shard=n % 3, message_id=f"00000000-0000-7000-8000-{n:012d}", body=f"m{n}",
               group_id=group, deduplication_id=dedup, sequence_number=sequence,
               sent_at=NOW, visible_at=NOW, receive_count=0, attributes=[])  # fmt: skip
    row.update(values)
    return row


def _at(seconds: int) -> datetime:
    return NOW + timedelta(seconds=seconds)


ROWS = [
    _row(1, 10, "d", "a", sent_at=_at(-600)),  # accepted
    _row(2, 20, "d", "a", sent_at=_at(-360)),  # 240 s later: a duplicate of 1
    _row(3, 30, "d", "b", sent_at=_at(-300)),  # 300 s after 1: accepted anew
    _row(4, 30, "e", "b", sent_at=_at(-10)),  # a tie in sequence with 3, another id
    _row(5, 30, "e", "c", sent_at=_at(-10)),  # the same tie and id: the lower message id wins
    _row(6, 40, "d", "c", sent_at=_at(-250), moved_from="src"),  # moved in: never a duplicate
    _row(7, 50, "d", "c", sent_at=_at(-200)),  # a duplicate of 3
    _row(8, 60, "f", "a", receipt_handle="h", visible_at=_at(30), receive_count=1),  # a in flight
    _row(9, 70, "g", "b", visible_at=_at(60)),  # b stops here: delayed
    _row(10, 80, "h", "b"),
    _row(11, 90, "i", "c", receive_count=3),  # c stops here: awaiting its dead-letter queue
    _row(12, 5, "j", "e", shard=-1),  # a tombstone
    _row(13, 100, "k", "f"),
    _row(14, 110, "l", "f"),
]


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    return rows_table(tmp_path_factory.mktemp("fifo"), ROWS)


def test_both_engines_judge_duplicates_and_group_prefixes_alike(spark, table):
    frame = spark.read.format("delta").load(table)
    history = [row.asDict() for row in frame.select(*DEDUPLICATION_COLUMNS).collect()]
    ids = [row["message_id"] for row in ROWS]
    assert accepted_originals(history)[ids[5]] is None  # moved in
    assert sorted(duplicates(history)) == [ids[1], ids[4], ids[6]]
    assert sorted(spark_fifo.duplicates_in(frame)) == sorted(duplicates(history))  # read by Spark
    native = NativeTables(PathLayout(table.rsplit("/", 1)[0]), RetryPolicy())
    dups = duplicates(deduplication_history(native, table))
    assert sorted(dups) == sorted(duplicates(history))  # read natively
    living = alive(NOW, ATTRS) & ~col("message_id").isin(dups)

    def both(order: str, ok: Expr | None = None) -> tuple[list, list]:
        ok = claimable(NOW, ATTRS) if ok is None else ok
        rule = {"living": living, "ok": ok, "held": in_flight(NOW), "order": order, "salt": "x"}
        natively = group_prefixes(native, table, ["message_id", "group_id"], **rule, limit=100)
        by_spark = spark_fifo.deliverable(frame, **rule).select("message_id", "group_id").collect()
        return [r["message_id"][-2:] for r in natively], [r.message_id[-2:] for r in by_spark]

    # a: held; b: up to its delayed row; c: its moved-in row, not its duplicate, up to the row
    # awaiting the dead-letter queue; e: a tombstone only. The fullest first (b and f have two;
    # their order is the salt's, the same in both), the oldest head first (b's 03, c's 06, f's 13)
    natively, by_spark = both(FULLEST)
    assert natively == by_spark
    assert sorted(natively[:4]) == ["03", "04", "13", "14"] and natively[4:] == ["06"]
    assert both(OLDEST) == (["03", "04", "06", "13", "14"],) * 2
    every_due = due(NOW)  # a move's rule: the row awaiting the dead-letter queue goes too
    assert both(OLDEST, every_due) == (["03", "04", "06", "11", "13", "14"],) * 2


def entry(body: str, group: str) -> dict[str, str]:
    return {"body": body, "group_id": group, "deduplication_id": body}


def test_spark_and_native_callers_share_a_fifo_queue_the_native_engine_numbers(
    spark, broker, clock
):
    """Native receives beside Spark's `receive_df` on a queue fed by `send_df` and `send_batch`:
    every message once, each group in send order; the redrive job's move into a FIFO dead-letter
    queue and the move back keep order too."""
    assert broker.engine == "native"
    broker.create_queue("mixed-dead.fifo", fifo=True)
    queue = broker.create_queue(
        "mixed.fifo", fifo=True, dead_letter_queue="mixed-dead.fifo", max_receive_count=1
    )
    on_spark = Broker(spark, broker.root, clock=clock, engine="spark")
    by_spark = on_spark.get_queue("mixed.fifo")
    rows = spark.range(12).select(
        F.format_string("s-%02d", "id").alias("body"), (F.col("id") % 3).cast("string").alias("g")
    )
    assert by_spark.send_df(rows, group_id="g", deduplication_id="body") == 12
    queue.send_batch([entry(f"n-{i:02d}", str(i % 3)) for i in range(12)])
    delivered: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 240

    def natively() -> None:
        while len(delivered) < 24 and time.monotonic() < deadline:
            batch = queue.receive(3, visibility_timeout=3600)
            with lock:
                delivered.extend((m.group_id, m.body, m.sequence_number) for m in batch)
            if batch:
                assert not queue.delete_batch([m.receipt_handle for m in batch]).failed

    def by_dataframes() -> None:
        while len(delivered) < 24 and time.monotonic() < deadline:
            frame = by_spark.receive_df(4, visibility_timeout=3600).cache()
            got = frame.select("group_id", "body", "sequence_number").collect()
            with lock:
                delivered.extend((r.group_id, r.body, r.sequence_number) for r in got)
            if got:
                assert not by_spark.delete_df(frame).failed

    run_threads([natively, by_dataframes])
    assert sorted(body for _, body, _ in delivered) == sorted(
        [f"s-{i:02d}" for i in range(12)] + [f"n-{i:02d}" for i in range(12)]
    )
    assert [b for b, n in Counter(body for _, body, _ in delivered).items() if n > 1] == []
    for group in "012":
        mine = [(body, number) for g, body, number in delivered if g == group]
        assert [n for _, n in mine] == sorted(n for _, n in mine)
        sent_order = sorted((b for b, _ in mine), key=lambda b: (b[0] != "s", b))  # s- first
        assert [b for b, _ in mine] == sent_order

    queue.send_batch([entry("x1", "x"), entry("x2", "x")])
    assert [m.body for m in queue.receive(10, visibility_timeout=5)] == ["x1", "x2"]
    clock.advance(6)
    assert on_spark.redrive().moved_to_dead_letter == 2
    dead = broker.get_queue("mixed-dead.fifo")
    in_order = sorted(dead.peek(10), key=lambda m: m["sequence_number"])
    assert [m["body"] for m in in_order] == ["x1", "x2"]
    assert dead.start_message_move() == 2
    back = queue.receive(10)
    assert [m.body for m in back] == ["x1", "x2"] and {m.receive_count for m in back} == {1}


def test_fifo_tables_spark_numbers_by_row_tracking_keep_working(spark, tmp_path, clock):
    root = str(tmp_path / "root")
    on_spark = Broker(spark, root, clock=clock, engine="spark")
    old = on_spark.create_queue("old.fifo", fifo=True)
    location = on_spark.context.record("old.fifo").location
    assert "rowTracking" in (DeltaTable(location).protocol().writer_features or [])
    old.send_batch([entry("a1", "a"), entry("a2", "a"), entry("b1", "b")])
    auto = Broker(spark, root, clock=clock)  # the native engine, Spark for this table
    assert auto.engine == "native"
    same = auto.get_queue("old.fifo")
    assert same.send("a1 again", group_id="a", deduplication_id="a1") == old.send(
        "a1", group_id="a", deduplication_id="a1"
    )
    assert same.stats().visible == 3
    got = same.receive(10)
    assert {m.group_id: [x.body for x in got if x.group_id == m.group_id] for m in got} == {
        "a": ["a1", "a2"],
        "b": ["b1"],
    }
    assert not same.delete_batch([m.receipt_handle for m in got]).failed
    with pytest.raises(UnsupportedOperation, match="row"):
        Broker(None, root).get_queue("old.fifo").receive()


def test_a_broker_without_the_native_engine_never_writes_a_table_it_numbers(spark, broker, clock):
    """A broker with Spark but no native engine (a Spark Connect session on a local root) tells
    the two kinds of FIFO table apart from Spark's table details, and refuses to add messages to
    one the native engine numbers rather than append rows without numbers."""
    native_queue = broker.create_queue("native.fifo", fifo=True)
    native_queue.send_batch([entry("a1", "a"), entry("a2", "a")])
    native_queue.send("a1 again", group_id="a", deduplication_id="a1")  # a duplicate
    record = broker.context.record("native.fifo")
    on_spark = Broker(spark, broker.root, engine="spark", clock=clock)
    without = dataclasses.replace(on_spark.context, native=None)
    assert without.sequenced(record) and not without.spark_only(record)
    with pytest.raises(UnsupportedOperation, match="natively"):
        without.tables_for(record)
    with pytest.raises(UnsupportedOperation, match="natively"):
        send.send_entries(
            without, record, [send.normalize_entry(entry("m", "g"), record.attributes)]
        )
    # Spark still reads it (the redrive job's counts): the same answers as the native engine's
    assert inspect.stats(without, record) == native_queue.stats()
    assert inspect.stats(without, record).visible == 2
    assert not Mover(without).writable(record) and Mover(broker.context).writable(record)
    old = on_spark.create_queue("spark.fifo", fifo=True)
    assert dataclasses.replace(old._ctx, native=None).spark_only(
        on_spark.context.record("spark.fifo")
    )


@pytest.mark.parametrize("numbered_by", ["native", "spark"])
def test_a_message_group_scope_keeps_groups_apart_in_both_engines(
    spark, broker, clock, numbered_by
):
    """`send_df` and `send` judge one id within its group on either kind of FIFO table; peeks and
    receives of both engines hand the id out as it was given."""
    on_spark = Broker(spark, broker.root, clock=clock, engine="spark")
    creator = broker if numbered_by == "native" else on_spark
    queue = creator.create_queue(
        "scoped.fifo", fifo=True, sqs_metadata={"DeduplicationScope": "messageGroup"}
    )
    by_spark = on_spark.get_queue("scoped.fifo")
    rows = spark.createDataFrame(
        [("a1", "a"), ("b1", "b"), ("a2", "a")], "body string, g string"
    ).withColumn("d", F.lit("same"))
    by_spark.send_df(rows, group_id="g", deduplication_id="d")
    first_a = next(p["message_id"] for p in queue.peek(10) if p["body"] == "a1")
    assert queue.send("a3", group_id="a", deduplication_id="same") == first_a  # a duplicate
    assert queue.send("c1", group_id="c", deduplication_id="same") != first_a  # its own group
    peeked = by_spark.peek_df(10).select("body", "deduplication_id").collect()
    assert sorted(tuple(row) for row in peeked) == [("a1", "same"), ("b1", "same"), ("c1", "same")]
    frame = by_spark.receive_df(2, visibility_timeout=600).cache()
    by_frame = sorted(tuple(r) for r in frame.select("body", "deduplication_id").collect())
    assert not by_spark.delete_df(frame).failed
    by_message = [(m.body, m.deduplication_id) for m in queue.receive(10)]
    assert sorted(by_frame + by_message) == [("a1", "same"), ("b1", "same"), ("c1", "same")]

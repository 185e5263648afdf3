"""Catalog mode: queues as tables of a catalog schema (Spark's session catalog with Delta's here;
Unity Catalog on Databricks), addressed by name in every statement, from one or several processes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.errors import (
    InvalidParameterValue,
    QueueDoesNotExist,
    ReceiptHandleIsInvalid,
    SchemaDoesNotExist,
)

from .test_concurrency import share_with_a_child

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def schema(spark, warehouse):
    """A fresh schema of the session catalog, at its default place under `warehouse`."""
    name = f"queues_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {name} LOCATION '{warehouse / f'{name}.db'}'")
    yield f"spark_catalog.{name}"
    spark.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def catalog_broker(spark, schema, clock) -> Broker:
    return Broker(spark, catalog=schema, clock=clock)


def tables(spark, schema: str) -> set[str]:
    return {row.tableName for row in spark.sql(f"SHOW TABLES IN {schema}").collect()}


def test_queues_are_tables_of_the_schema_addressed_by_name(spark, schema, catalog_broker, clock):
    broker = catalog_broker
    assert repr(broker) == f"Broker(catalog={schema!r}, engine='spark')" and broker.root is None
    queue = broker.create_queue("Orders-1", visibility_timeout=60)
    location = broker.context.record("Orders-1").location
    table = location.rsplit(".", 1)[-1]
    assert location == f"{schema}.{table}" and table.startswith("queue_orders_1_")
    assert tables(spark, schema) == {"sparkqueue_queues", table}
    detail = spark.sql(f"DESCRIBE DETAIL {location}").first()
    assert detail.properties["delta.enableDeletionVectors"] == "false"
    assert detail.partitionColumns == ["shard"]

    queue.send_batch(["a", "b", "c"])
    held = queue.receive(2)
    queue.change_visibility(held[0].receipt_handle, 0)
    [again] = [m for m in queue.receive(10) if m.message_id == held[0].message_id]
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.delete(held[0].receipt_handle)  # superseded by the second receive
    outcome = queue.delete_batch([again.receipt_handle, held[1].receipt_handle, "bogus"])
    assert len(outcome.successful) == 2 and list(outcome.failed.values()) == [
        "ReceiptHandleIsInvalid"
    ]

    queue.send_df(spark.range(20).select(F.col("id").cast("string").alias("body")))
    batch = queue.receive_df(15)
    assert batch.count() == 15 and len(queue.delete_df(batch).successful) == 15
    assert f"{table}_claims" in tables(spark, schema)
    operations = {row.operation for row in spark.sql(f"DESCRIBE HISTORY {location}").collect()}
    assert {"WRITE", "UPDATE", "DELETE"} <= operations

    other = Broker(spark, catalog=schema.split(".")[1], clock=clock)  # in the current catalog
    assert other.list_queues() == ["Orders-1"]
    stats = other.get_queue("Orders-1").stats()
    assert (stats.visible, stats.in_flight) == (5, 1)  # "c" is still held
    broker.delete_queue("Orders-1")
    assert tables(spark, schema) == {"sparkqueue_queues"}
    with pytest.raises(QueueDoesNotExist, match=schema):
        broker.get_queue("Orders-1")


def test_fifo_redrive_moves_and_the_worker_in_a_catalog_schema(
    spark, schema, catalog_broker, clock
):
    broker = catalog_broker
    fifo = broker.create_queue("jobs.fifo", fifo=True, content_based_deduplication=True)
    fifo.send_batch([{"body": body, "group_id": group} for body, group in FIFO_ENTRIES])
    everything = fifo.receive(10)  # the duplicate "c" is gone; each group in order
    assert sorted((m.group_id, m.body) for m in everything) == [
        ("g1", "a"),
        ("g1", "b"),
        ("g2", "c"),
    ]
    assert fifo.receive(10) == []  # both groups are held
    fifo.delete_batch([m.receipt_handle for m in everything if m.group_id == "g2"])
    fifo.send("d", group_id="g2")
    assert [m.body for m in fifo.receive(10)] == ["d"]  # g1 is still held

    broker.create_queue("dead")
    queue = broker.create_queue("work", dead_letter_queue="dead", max_receive_count=1)
    queue.send_df(spark.range(6).select(F.format_string("job %d", "id").alias("body")))
    sink = f"{schema}.results"

    def handler(batch):
        broker.write_once(batch.where(F.col("body") != "job 3").select("message_id", "body"), sink)
        return batch.select("message_id", (F.col("body") != "job 3").alias("succeeded"))

    report = queue.consume(handler, batch_size=10, max_batches=1)
    assert report.deleted == 5
    assert spark.read.table(sink).count() == 5
    clock.advance(queue.attributes["visibility_timeout"] + 1)
    assert broker.redrive().moved_to_dead_letter == 1
    dead = broker.get_queue("dead")
    assert [row.body for row in dead.peek_df().collect()] == ["job 3"]
    assert dead.start_message_move() == 1
    assert [row.body for row in queue.peek_df().collect()] == ["job 3"]
    assert broker.redrive_metrics().count() > 0
    assert "sparkqueue_metrics" in tables(spark, schema)


FIFO_ENTRIES = [("a", "g1"), ("b", "g1"), ("c", "g2"), ("c", "g2")]

CHILD = """
import json, pathlib, sys
from sparkqueue import Broker, spark_session
from tests.integration.test_concurrency import share_the_queue

warehouse, catalog, out, ready = sys.argv[1:5]
spark = spark_session(**{"spark.sql.warehouse.dir": warehouse})
queue = Broker(spark, catalog=catalog).get_queue("shared")
pathlib.Path(ready).touch()  # warm and ready: the parent starts its own part now
json.dump(share_the_queue(queue, "child"), open(out, "w"))
"""


def test_two_processes_share_a_schema_of_a_local_warehouse(catalog_broker, schema, warehouse):
    """The child's catalog is its own (Spark's local catalog lives in one process): it finds the
    schema and the tables in the shared warehouse folder, and takes the same commit locks."""
    queue = catalog_broker.create_queue("shared")
    share_with_a_child(queue, CHILD, [str(warehouse), schema], warehouse.parent)


def test_a_missing_or_malformed_schema_is_a_clear_error_and_creates_nothing(spark, schema):
    before = {row[0] for row in spark.sql("SHOW SCHEMAS").collect()}
    with pytest.raises(SchemaDoesNotExist, match=r"spark_catalog\.nothing_here does not exist"):
        Broker(spark, catalog="spark_catalog.nothing_here")
    for bad in ["main.queues.extra", "main.`queues`", "queues; DROP", ""]:
        with pytest.raises(InvalidParameterValue, match="catalog must name a schema"):
            Broker(spark, catalog=bad)
    with pytest.raises(InvalidParameterValue, match="exactly one of root"):
        Broker(spark, "/tmp/somewhere", catalog=schema)
    with pytest.raises(InvalidParameterValue, match="exactly one of root"):
        Broker(spark)
    assert {row[0] for row in spark.sql("SHOW SCHEMAS").collect()} == before

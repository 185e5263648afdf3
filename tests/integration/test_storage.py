"""The storage layer's promises: DML that reports what it changed, queue tables whose files
stay small because they have no deletion vectors, and lean commits on local roots."""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import functions as F

from sparkqueue import Broker
from sparkqueue.limits import QUEUE_ROWS_PER_FILE
from sparkqueue.store import sql

from .helpers import queue_table


def test_update_and_delete_report_the_rows_their_commit_changed(broker, queue):
    queue.send_batch([f"m{i}" for i in range(5)])
    storage, location = broker.storage.interpreted, broker.context.record("work").location
    key = ("shard", "message_id")
    mine = F.col("body").isin(["m0", "m1", "m2"])

    updated = storage.change(location, mine, key, {"body": F.concat("body", F.lit("!"))})
    assert (updated.known, updated.updated, updated.deleted) == (True, 3, 0)
    assert storage.change(location, mine, key, {"body": F.lit("x")}).all_of(0)  # none left

    deleted = storage.change(location, F.col("body").endswith("!"), key)
    assert (deleted.known, deleted.deleted) == (True, 3)
    assert sorted(row.body for row in queue_table(queue).collect()) == ["m3", "m4"]


def test_queue_tables_have_no_deletion_vectors_and_small_files(broker, spark):
    queue = broker.create_queue("wide", shards=1)
    queue.send_df(
        spark.range(QUEUE_ROWS_PER_FILE * 2 + 1).select(F.col("id").cast("string").alias("body"))
    )
    location = broker.context.record("wide").location
    detail = broker.storage.detail(location).first()
    assert detail.properties["delta.enableDeletionVectors"] == "false"
    assert detail.numFiles == 3  # QUEUE_ROWS_PER_FILE rows at most per file

    message = queue.receive(1)[0]
    queue.delete(message.receipt_handle)  # rewrites one small file; no deletion vector appears
    last = broker.storage.spark.sql(sql.describe_history(sql.path_table(location), 1)).first()
    assert last.operation == "DELETE"
    assert last.operationMetrics.get("numDeletionVectorsAdded", "0") == "0"


def test_a_commit_on_a_local_root_adds_few_log_entries(spark, broker, queue, clock):
    """Spark's commit file and Delta's checksum, without Hadoop's `.crc` sidecars for each; the
    native engine's commit file alone."""
    log = Path(urlparse(broker.context.record("work").location).path) / "_delta_log"
    by_spark = Broker(spark, broker.root, engine="spark", clock=clock).get_queue("work")
    for sender, suffixes in ((by_spark, [".crc", ".json"]), (queue, [".json"])):
        before = set(os.listdir(log))
        sender.send("one more commit")
        added = set(os.listdir(log)) - before
        assert sorted(Path(name).suffix for name in added) == suffixes, added


def test_a_queue_table_of_an_older_version_gains_the_new_columns(spark, tmp_path):
    """A queue created before `attribute_types` existed keeps working: opening it adds the column."""
    from pyspark.sql.types import StructType

    from sparkqueue import Broker
    from sparkqueue.store.schema import QUEUE_TABLE_PROPERTIES
    from sparkqueue.store.spark_schema import MESSAGE_SCHEMA

    root = str(tmp_path / "root")
    broker = Broker(spark, root)
    broker.create_queue("old")
    location = broker.context.record("old").location
    older = StructType([f for f in MESSAGE_SCHEMA.fields if f.name != "attribute_types"])
    older_table = f"{location}-older"
    broker.storage.ensure_table(older_table, older, properties=QUEUE_TABLE_PROPERTIES)
    assert "attribute_types" not in broker.storage.read(older_table).columns

    later = Broker(spark, root)  # a new process's view: the table is not known to it yet
    assert later.storage.upgrade_table(older_table, MESSAGE_SCHEMA)  # what a lookup does
    assert "attribute_types" in later.storage.read(older_table).columns
    assert not later.storage.upgrade_table(f"{location}-missing", MESSAGE_SCHEMA)
    assert not os.path.exists(urlparse(f"{location}-missing").path)  # a lookup never creates


def test_threads_creating_one_table_never_clear_each_others_creation(broker, queue, monkeypatch):
    """A creation first clears what a dead creation left (a `_delta_log` with no version): run
    in two threads of one process at once, one could clear the log of the other's creation under
    way. Creations of one table now run alone; the test counts creations inside at once."""
    from sparkqueue.store import storage as storage_module
    from sparkqueue.store.spark_schema import MESSAGE_SCHEMA

    from .helpers import run_threads

    storage = broker.storage
    address = f"{broker.context.record('work').location}-twice"
    inside, most = [0], [0]
    clear, remember = storage_module.clear_unfinished_log, storage._remember

    def clearing(folder: str) -> bool:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.3)  # a creation takes a while: the window another thread used to enter
        return clear(folder)

    def remembering(table: str) -> None:
        if table == address:
            inside[0] -= 1
        remember(table)

    monkeypatch.setattr(storage_module, "clear_unfinished_log", clearing)
    monkeypatch.setattr(storage, "_remember", remembering)
    run_threads([lambda: storage.ensure_table(address, MESSAGE_SCHEMA)] * 2)
    assert most[0] == 1
    assert storage.read(address).count() == 0

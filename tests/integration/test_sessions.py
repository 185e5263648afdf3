"""Single-message operations run interpreted in a child session; bulk work runs compiled."""

from __future__ import annotations

from sparkqueue import Broker
from sparkqueue.store.storage import INTERPRETED


def test_the_interpreted_storage_is_a_child_with_the_callers_settings(spark, tmp_path):
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        storage = Broker(spark, str(tmp_path / "root")).storage
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    assert storage.spark is spark
    child = storage.interpreted.spark
    assert child is not spark
    assert child.conf.get("spark.sql.shuffle.partitions") == "3"
    for key, value in INTERPRETED.items():
        assert child.conf.get(key) == value
    assert spark.conf.get("spark.sql.codegen.factoryMode") != "NO_CODEGEN"
    # The two views share one root: its conflict counter and its known tables.
    assert storage.interpreted.conflicts is storage.conflicts
    assert storage.interpreted.layout is storage.layout


def test_quick_and_bulk_operations_share_the_tables(broker, queue):
    queue.send_batch(["a", "b"])  # quick
    sent = queue.send_df(broker.spark.createDataFrame([("c",)], "body string"))  # bulk
    assert sent == 1
    received = queue.receive(10)  # quick
    assert sorted(m.body for m in received) == ["a", "b", "c"]
    assert queue.delete_batch([m.receipt_handle for m in received]).failed == {}
    assert queue.stats().visible == 0

"""Single-message operations run interpreted in a child session; bulk work runs compiled."""

from __future__ import annotations

import threading

from sparkqueue import Broker
from sparkqueue.storage import INTERPRETED


def test_quick_operations_use_an_interpreting_child_with_the_callers_settings(spark, tmp_path):
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        storage = Broker(spark, str(tmp_path / "root")).storage
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    assert storage.spark is spark
    with storage.quick():
        child = storage.spark
        assert child is not spark
        assert child.sparkContext is spark.sparkContext
        assert child.conf.get("spark.sql.shuffle.partitions") == "3"
        for key, value in INTERPRETED.items():
            assert child.conf.get(key) == value
        with storage.quick():
            assert storage.spark is child
        assert storage.spark is child  # a nested block leaves the outer one as it was
    assert storage.spark is spark
    assert spark.conf.get("spark.sql.codegen.factoryMode") != "NO_CODEGEN"


def test_the_quick_mode_is_per_thread(broker):
    storage = broker.storage
    seen = []
    with storage.quick():
        thread = threading.Thread(target=lambda: seen.append(storage.spark))
        thread.start()
        thread.join()
    assert seen == [broker.spark]


def test_quick_and_bulk_operations_share_the_tables(broker, queue):
    queue.send_batch(["a", "b"])  # quick
    sent = queue.send_df(broker.spark.createDataFrame([("c",)], "body string"))  # bulk
    assert sent == 1
    received = queue.receive(10)  # quick
    assert sorted(m.body for m in received) == ["a", "b", "c"]
    assert queue.delete_batch([m.receipt_handle for m in received]).failed == {}
    assert queue.stats().visible == 0

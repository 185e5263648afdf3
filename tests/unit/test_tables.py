"""Layouts: what each of a broker's tables is called, and how statements name it, in both modes."""

from __future__ import annotations

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.store.tables import CatalogLayout, PathLayout, Table, check_catalog_schema


def test_a_path_layout_keeps_the_folders_of_a_root():
    layout = PathLayout("/data/queues/")
    assert layout.uri == "file:/data/queues" and layout.local_dir == "/data/queues"
    assert layout.registry == "file:/data/queues/_sparkqueue/queues"
    queue = layout.new_queue("orders.fifo")
    assert queue.startswith("file:/data/queues/queues/orders.fifo-")
    assert layout.claims(queue) == f"file:/data/queues/_sparkqueue/claims/{queue.rsplit('/')[-1]}"
    assert layout.lock_file(queue) == (
        f"/data/queues/_sparkqueue/locks/queues__{queue.rsplit('/')[-1]}.lock"
    )
    assert layout.where == "root='file:/data/queues'"


def test_remote_roots_have_no_local_folder_and_no_lock():
    layout = PathLayout("s3a://bucket/queues")
    assert layout.local_dir is None and layout.lock_file(layout.registry) is None
    assert PathLayout("/Volumes/main/q/v").local_dir is None


def test_object_storage_is_told_by_its_scheme():
    for root in ("s3://b/q", "S3A://b/q", "gs://b/q", "abfss://c@a.dfs.core.windows.net/q"):
        assert PathLayout(root).object_store, root
    for root in ("/data/q", "file:/data/q", "dbfs:/q", "/Volumes/main/q/v", "hdfs://nn/q"):
        assert not PathLayout(root).object_store, root


def test_a_path_table_is_named_by_its_path_in_sql_and_in_merges():
    table = Table("file:/r/q", named=False)
    assert table.sql == "delta.`file:/r/q`"
    assert table.prefix == "`file:/r/q`."


def test_a_catalog_layout_names_one_table_per_role_in_its_schema():
    layout = CatalogLayout("main", "queues", "file:/wh/queues")
    assert layout.registry == "main.queues.sparkqueue_queues"
    assert layout.metrics == "main.queues.sparkqueue_metrics"
    queue = layout.new_queue("Orders-1.fifo")
    assert queue.startswith("main.queues.queue_orders_1_fifo_")
    assert layout.new_queue("Orders-1.fifo") != queue  # a re-created queue gets a new table
    assert layout.claims(queue) == f"{queue}_claims"
    table = layout.table(queue)
    assert table.named and table.sql == ".".join(f"`{part}`" for part in queue.split("."))
    assert table.prefix == f"`{queue.rsplit('.')[-1]}`."
    assert layout.folder(queue) == f"/wh/queues/{queue.rsplit('.')[-1]}"
    assert (
        layout.lock_file(queue) == f"/wh/queues/_sparkqueue/locks/{queue.replace('.', '__')}.lock"
    )
    assert layout.where == "catalog='main.queues'"


def test_in_catalog_mode_sinks_may_be_names_or_paths():
    layout = CatalogLayout("main", "queues", "s3://bucket/queues")
    assert layout.table("main.results.out").named
    assert layout.table("results.out").named
    assert not layout.table("/Volumes/main/results/out").named
    assert layout.local_dir is None and layout.lock_file("main.results.out") is None
    assert layout.folder("other.schema.table") is None


def test_unity_catalog_schemas_without_a_location_are_not_local():
    assert CatalogLayout("main", "queues", "").local_dir is None


@pytest.mark.parametrize("catalog", ["queues", "main.queues", "dev-1.q_2"])
def test_catalog_schemas_are_one_or_two_plain_parts(catalog):
    assert check_catalog_schema(catalog) == tuple(catalog.split("."))


@pytest.mark.parametrize("catalog", ["", "a.b.c", "main.`q`", "main.q s", "main..q", None, 7])
def test_other_catalog_schemas_are_rejected_before_any_sql(catalog):
    with pytest.raises(InvalidParameterValue, match="catalog must name a schema"):
        check_catalog_schema(catalog)


def test_one_table_has_one_lock_however_its_root_is_spelled(tmp_path):
    real = tmp_path / "queues"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    through_link, direct = PathLayout(str(link)), PathLayout(f"{real}/../queues")
    queue = through_link.new_queue("orders")  # as the registry keeps it: the creator's spelling
    moved = queue.replace(str(link), str(real))
    locks = {layout.lock_file(address) for layout in (through_link, direct)
             for address in (queue, moved)}  # fmt: skip
    assert locks == {f"{real}/_sparkqueue/locks/queues__{queue.rsplit('/')[-1]}.lock"}

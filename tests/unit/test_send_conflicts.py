"""A send beside consumers: an append reads nothing, so no claim or delete committed while it was
written may fail it. delta-rs counts an append as a read of the whole table (any concurrent
removal of data fails it), so a send names the shards and ids it appends (store/statements.py
`append_rows`' `within`) and is checked against those alone."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from sparkqueue import Broker
from sparkqueue.engine.messages.send import normalize_entry, send_entries
from sparkqueue.store import native_tables
from tests.unit.test_native_engine import produce_beside_consumers


def _rows(ids: list[str]) -> pa.Table:
    return pa.table({"shard": pa.array([0] * len(ids), pa.int32()), "message_id": ids})


def _append_beside_a_claim(root: str, claimed: str, ids: list[str], **bounds: str) -> None:
    """Appends `ids` from a snapshot read before another handle's UPDATE of the row `claimed`
    (its id given an "x") removed its file."""
    sending, claiming = DeltaTable(root), DeltaTable(root)
    renamed = {"message_id": f"'{claimed}x'"}
    changed = claiming.update(predicate=f"message_id = '{claimed}'", updates=renamed)
    assert changed["num_updated_rows"] == 1
    write_deltalake(sending, _rows(ids), mode="append", **bounds)


def test_delta_rs_fails_an_append_beside_a_removal_unless_its_rows_are_named(tmp_path):
    """Why sends name their ids: when delta-rs stops failing a plain append for a concurrent
    UPDATE (appends marked blind), the first half fails, and `within` can go."""
    root = str(tmp_path)
    write_deltalake(root, _rows(["a1", "a2"]), partition_by=["shard"])
    with pytest.raises(CommitFailedError, match="deleted data this operation read"):
        _append_beside_a_claim(root, "a1", ["b1", "b2"])
    bounds = "message_id >= 'b1' AND message_id <= 'b2'"
    _append_beside_a_claim(root, "a2", ["b1", "b2"], predicate=bounds)
    ids = DeltaTable(root).to_pyarrow_table().column("message_id").to_pylist()
    assert sorted(ids) == ["a1x", "a2x", "b1", "b2"]


def test_sends_beside_another_brokers_receives_and_deletes_never_run_twice(tmp_path):
    """One broker sends, another receives and deletes at the same moments (no shared rounds):
    no send re-runs for a conflict, and every message is delivered once."""
    root = str(tmp_path / "root")
    producer, consumer = Broker(None, root), Broker(None, root)
    producer.create_queue("jobs")
    sending = producer.get_queue("jobs")
    sent: list[str] = []

    def produce() -> None:
        for i in range(40):
            sent.extend(sending.send_batch([f"{i}.{j}" for j in range(5)]))

    delivered = produce_beside_consumers(consumer.get_queue("jobs"), [produce], 2, 10)
    assert sorted(m.message_id for m in delivered) == sorted(sent)
    assert len(sent) == 200
    assert producer.conflict_retries == 0


@pytest.mark.parametrize("once", [None, ("a-sink", 7)])
def test_a_send_is_written_once_though_a_delete_commits_while_it_is_written(
    tmp_path, monkeypatch, once
):
    """Every write of the producer's broker lets the consumer's broker receive and delete a
    message first, between the send's read of the table and its commit: the send, plain or
    recorded by app id and version (a stream sink's batch), is written at its first attempt."""
    root = str(tmp_path / "root")
    producer, consumer = Broker(None, root), Broker(None, root)
    producer.create_queue("jobs")
    producer.get_queue("jobs").send_batch(["old 1", "old 2"])
    taking = consumer.get_queue("jobs")
    real = native_tables.write_deltalake

    def beside_a_delete(*args, **kwargs):
        if taken := taking.receive(1, visibility_timeout=3600):
            assert not taking.delete_batch([m.receipt_handle for m in taken]).failed
        return real(*args, **kwargs)

    monkeypatch.setattr(native_tables, "write_deltalake", beside_a_delete)
    ctx = producer.context
    record = ctx.record("jobs")
    entry = normalize_entry("new", record.attributes)
    send_entries(ctx, record, [entry], once=once)
    if once is not None:  # a replay of the batch sends nothing
        send_entries(ctx, record, [entry], once=once)
    monkeypatch.undo()
    assert producer.conflict_retries == 0
    left = sorted(m.body for m in taking.receive(10, visibility_timeout=3600))
    assert len(left) == 2 and left[0] == "new" and left[1] in ("old 1", "old 2")  # one was taken

"""The native engine's large rounds: one delta-rs MERGE from an Arrow source (above
EXCHANGE_UPDATE_MAX_ROWS rows) that retires, extends and claims with the same rules as the
UPDATE of a small round, checked against the table itself and against other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.engine.rounds.statement import ROUND_SOURCE
from sparkqueue.limits import EXCHANGE_UPDATE_MAX_ROWS
from sparkqueue.rules import handles
from sparkqueue.rules.expr import col, lit, source
from sparkqueue.store.native_arrow import arrow_schema
from sparkqueue.store.schema import MESSAGE_COLUMNS
from sparkqueue.store.statements import ListedMerge

REPO = Path(__file__).resolve().parents[2]
BATCH = EXCHANGE_UPDATE_MAX_ROWS["native"] + 50  # every exchange below is a MERGE


def _last_operation(broker, name: str) -> str:
    folder = broker.context.record(name).location.removeprefix("file:")
    return DeltaTable(folder).history(1)[0]["operation"]


def _refs(record, messages):
    return [handles.parse(record.secret, m.receipt_handle) for m in messages]


def test_a_large_exchange_is_one_merge_that_retires_and_claims(broker):
    queue = broker.create_queue("big")
    sent = queue.send_batch([f"m{i}" for i in range(3 * BATCH)])
    ctx, record = broker.context, broker.context.record("big")
    first = rounds.settle_and_claim(ctx, record, [], BATCH, 600)
    second = rounds.settle_and_claim(ctx, record, _refs(record, first.claimed), BATCH, 600)
    assert _last_operation(broker, "big") == "MERGE"
    assert len(first.claimed) == len(second.claimed) == BATCH and not second.superseded
    assert not {m.message_id for m in first.claimed} & {m.message_id for m in second.claimed}
    assert {m.receive_count for m in second.claimed} == {1}
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (len(sent) - 2 * BATCH, BATCH)
    # the claimed rows hold the handles the round issued: they delete, once
    assert not queue.delete_batch([m.receipt_handle for m in second.claimed]).failed
    expected = {f.name: f.type for f in arrow_schema(MESSAGE_COLUMNS) if f.name != "shard"}
    folder = record.location.removeprefix("file:")
    for path in Path(folder).rglob("*.parquet"):  # a MERGE's files keep every column's type
        written = pq.read_schema(path)
        for name, wanted in expected.items():
            got = written.field(name).type
            same = pa.types.is_string(got) or pa.types.is_string_view(got)
            assert same if pa.types.is_string(wanted) else got == wanted, (path.name, name, got)


def test_the_native_statement_turns_to_a_merge_above_its_own_size(broker):
    """delta-rs's UPDATE of 100 literal rows costs twice its MERGE: a native round of more than
    EXCHANGE_UPDATE_MAX_ROWS["native"] rows (fewer than Spark's) is a MERGE, and at it an UPDATE."""
    most = EXCHANGE_UPDATE_MAX_ROWS["native"]
    assert most < EXCHANGE_UPDATE_MAX_ROWS["spark"]
    queue = broker.create_queue("sizes")
    queue.send_batch([f"m{i}" for i in range(2 * most + 1)])
    assert len(queue.receive(most)) == most
    assert _last_operation(broker, "sizes") == "UPDATE"
    assert len(queue.receive(most + 1)) == most + 1
    assert _last_operation(broker, "sizes") == "MERGE"


def test_statements_that_name_rows_by_id_name_their_range_too(broker):
    """A producer's files appended to a shard hold newer ids than the rows a claim, a delete or a
    visibility change names: the range lets delta-rs skip those files by their statistics, where
    an IN list of more than a few ids does not."""
    queue = broker.create_queue("ranges", shards=1)
    queue.send_batch([f"m{i}" for i in range(40)])
    ctx, record = broker.context, broker.context.record("ranges")
    folder = record.location.removeprefix("file:")

    def names_range(ids: list[str]) -> bool:
        predicate = DeltaTable(folder).history(1)[0]["operationParameters"]["predicate"]
        predicate = predicate.replace('"', "")  # however delta-rs renders names back
        return (
            f"message_id >= '{min(ids)}'" in predicate
            and f"message_id <= '{max(ids)}'" in predicate
        )

    claimed = queue.receive(20)  # the claim's UPDATE
    ids = [m.message_id for m in claimed]
    assert names_range(ids)
    queue.change_visibility_batch([(m.receipt_handle, 60) for m in claimed])
    assert names_range(ids)
    # a round's UPDATE: 10 retired and 10 claimed, under the native engine's MERGE size
    turn = rounds.settle_and_claim(ctx, record, _refs(record, claimed[:10]), 10, 60)
    assert _last_operation(broker, "ranges") == "UPDATE"
    assert names_range(ids[:10] + [m.message_id for m in turn.claimed])
    queue.delete_batch([m.receipt_handle for m in claimed[10:]])  # the DELETE
    assert names_range(ids[10:])


def test_a_large_round_tells_superseded_handles_and_applies_visibility_changes(broker, clock):
    queue = broker.create_queue("stale", visibility_timeout=30)
    queue.send_batch([f"m{i}" for i in range(BATCH)])
    record = broker.context.record("stale")
    old = rounds.settle_and_claim(broker.context, record, [], BATCH, 30).claimed
    clock.advance(30)
    again = rounds.settle_and_claim(broker.context, record, [], BATCH, 30).claimed
    assert len(again) == BATCH and {m.receive_count for m in again} == {2}
    stale = queue.delete_batch([m.receipt_handle for m in old])  # one MERGE that matches none
    assert len(stale.failed) == BATCH and queue.stats().in_flight == BATCH
    extended = queue.change_visibility_batch([(m.receipt_handle, 120) for m in again])
    assert _last_operation(broker, "stale") == "MERGE" and not extended.failed
    clock.advance(119)
    assert queue.receive(10) == []
    clock.advance(1)
    assert len(queue.receive(10)) == 10


CHILD = """
import json, os, sys, time
from sparkqueue import Broker
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.rules import handles

queue = Broker(None, sys.argv[1]).get_queue("shared")
ctx, record = queue._ctx, queue._ctx.record("shared")
taken, finished = [], []
print("ready", flush=True)
while not os.path.exists(sys.argv[3]):  # all start together
    time.sleep(0.005)
while True:
    turn = rounds.settle_and_claim(ctx, record, finished, int(sys.argv[2]), 3600)
    assert turn.error is None and not turn.superseded, turn
    if not turn.claimed:
        break
    taken += [m.message_id for m in turn.claimed]
    finished = [handles.parse(record.secret, m.receipt_handle) for m in turn.claimed]
print(json.dumps(taken))
"""


def test_processes_exchanging_large_batches_take_every_message_once(broker, tmp_path):
    """Three processes loop the worker's exchange (a MERGE each) on one queue until it is
    empty, all at once (delta-rs's conflict check decides between them, on a local root as on
    object storage): every message is taken once. Not how evenly: on S3 one process can win
    every round while the others back off and retry. Batches four times the MERGE threshold
    keep the rounds few: each costs a conflict check per process, and a round trip each on
    object storage."""
    broker = Broker(None, broker.root)  # on the wall clock, as the processes are
    queue = broker.create_queue("shared")
    sent = []
    for start in range(0, 2_000, 1_000):
        sent += queue.send_batch([f"m{i}" for i in range(start, start + 1_000)])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, broker.root, str(4 * BATCH), str(go)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for child in children:  # each has opened the queue and waits
        assert child.stdout.readline().strip() == b"ready"
    go.touch()
    by_child: list[list[str]] = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0
        by_child.append(json.loads(out))
    taken = [message_id for ids in by_child for message_id in ids]
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)


def test_a_large_round_commits_beside_a_newer_append_to_its_shards(broker, monkeypatch):
    """A round read its snapshot, then a producer appended to the same shard: the MERGE's read
    predicate names the ids it read (not only their shards), so delta-rs lets it commit."""
    queue = broker.create_queue("busy", shards=1)
    [first] = queue.send_batch(["first"])
    record = broker.context.record("busy")
    tables = broker.context.tables_for(record)
    stale = tables.open(record.location)
    queue.send_batch(["later"])  # a newer id in the same shard, committed after that read
    read_at = stale.version()
    monkeypatch.setattr(tables._kept, "_take", lambda address: (stale, read_at, None))
    rows = [{"src_op": "retire", "src_shard": 0, "src_id": first, "src_handle": "h",
             "src_count": None, "src_visible_us": None}]  # fmt: skip
    merge = ListedMerge(
        ROUND_SOURCE,
        rows,
        {"shard": "src_shard", "message_id": "src_id"},
        [0],
        [(col("message_id") == source("src_id"), {"body": lit("changed")})],
    )
    counts = tables.merge_changes(record.location, merge)
    monkeypatch.undo()
    assert stale.version() == read_at + 2  # the MERGE ran on the stale read, one version on
    assert counts.updated == 1
    assert sorted(m["body"] for m in queue.peek(10)) == ["changed", "later"]


def test_a_large_send_is_spread_over_every_shard_in_runs_and_a_small_one_is_not(tmp_path):
    """Receivers of different processes start at random shards: a large send spread over all of
    them (one file each, a run of the send's messages) gives each its own work; a small send stays in one."""
    from deltalake import DeltaTable

    from sparkqueue.limits import SPREAD_SEND_ROWS

    broker = Broker(None, str(tmp_path))
    queue = broker.create_queue("spread", shards=4)
    queue.send_batch([f"small {i}" for i in range(SPREAD_SEND_ROWS - 1)])
    location = broker.context.record("spread").location.removeprefix("file:")
    files = pa.table(DeltaTable(location).get_add_actions(flatten=True))
    assert files.num_rows == 1
    queue.send_batch([f"large {i}" for i in range(SPREAD_SEND_ROWS * 2)])
    files = pa.table(DeltaTable(location).get_add_actions(flatten=True)).to_pylist()
    large = [f for f in files if f["num_records"] != SPREAD_SEND_ROWS - 1]
    assert sorted(f["partition.shard"] for f in large) == [0, 1, 2, 3]
    assert sorted(f["num_records"] for f in large) == [SPREAD_SEND_ROWS // 2] * 4
    rows = pa.table(DeltaTable(location).to_pyarrow_table()).to_pylist()
    by_shard: dict[int, list[int]] = {}
    for row in rows:
        if row["body"].startswith("large"):
            by_shard.setdefault(row["shard"], []).append(int(row["body"].split()[1]))
    runs = [sorted(run) for run in by_shard.values()]  # each shard a run of the send's order
    assert [run == list(range(run[0], run[0] + len(run))) for run in runs] == [True] * 4

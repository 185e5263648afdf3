"""The native engine (delta-rs) on its own: a broker with no Spark session, real Delta tables and
real commits, threads and processes, and no JVM anywhere (the unit suite's rule)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import QueryBuilder

from sparkqueue import Broker
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.errors import (
    InvalidParameterValue,
    ReceiptHandleIsInvalid,
    UnsupportedOperation,
)
from sparkqueue.rules import handles
from sparkqueue.rules.expr import col, lit
from sparkqueue.store.native_arrow import arrow_schema
from sparkqueue.store.native_sql import literal, to_sql
from sparkqueue.store.schema import MESSAGE_COLUMNS

REPO = Path(__file__).resolve().parents[2]


def _evaluate(sql: str) -> object:
    return pa.table(QueryBuilder().execute(f"SELECT {sql} AS v")).to_pylist()[0]["v"]


@pytest.mark.parametrize(
    "text",
    ["plain", "it's", "''; DROP TABLE t; --", 'a "quoted" name', "back\\slash", "emoji 🙂", ""],
)
def test_text_literals_come_back_exactly_as_given(text):
    assert _evaluate(literal(lit(text))) == text


def test_a_literal_with_nul_is_refused_rather_than_cut():
    with pytest.raises(ValueError, match="NUL"):
        literal(lit("a\x00b"))


def test_an_empty_in_list_matches_nothing_as_in_spark():
    assert _evaluate(to_sql(lit(1).isin([]))) is False


def test_column_names_are_quoted_and_never_read_as_sql():
    assert to_sql(col('x" OR 1=1 --') == "v") == '("x"" OR 1=1 --" = \'v\')'


def test_a_broker_without_spark_serves_every_per_message_operation(broker, clock):
    assert broker.engine == "native" and broker.spark is None
    queue = broker.create_queue("work", visibility_timeout=30)
    ids = queue.send_batch(["a", {"body": "b", "attributes": {"k": "v"}}, "c"])
    assert len(set(ids)) == 3
    assert queue.stats().visible == 3
    first, second = queue.receive(2)
    assert {first.receive_count, second.receive_count} == {1}
    queue.change_visibility(first.receipt_handle, 300)
    queue.delete(second.receipt_handle)
    clock.advance(31)
    [left] = {"a", "b", "c"} - {first.body, second.body}
    assert [m["body"] for m in queue.peek(10)] == [left]
    [third] = queue.receive(5)
    assert third.body == left
    queue.change_visibility(third.receipt_handle, 0)  # a release: visible again at once
    [again] = queue.receive(1)
    assert (again.message_id, again.receive_count) == (third.message_id, 2)
    with pytest.raises(ReceiptHandleIsInvalid):
        queue.change_visibility(third.receipt_handle, 10)  # superseded by the later receive
    result = queue.delete_batch([first.receipt_handle, again.receipt_handle, "forged"])
    assert (len(result.successful), list(result.failed)) == (2, ["forged"])
    stats = queue.stats()
    assert (stats.visible, stats.in_flight, stats.delayed) == (0, 0, 0)
    queue.send("d", delay_seconds=60)
    assert queue.stats().delayed == 1
    assert queue.purge() == 1


def test_what_needs_spark_says_so_and_changes_nothing(broker, tmp_path):
    queue = broker.create_queue("plain")
    with pytest.raises(UnsupportedOperation, match="Spark session"):
        queue.peek_df()
    with pytest.raises(UnsupportedOperation, match="Spark session"):
        broker.create_queue("ordered.fifo", fifo=True).receive_df(10)
    with pytest.raises(InvalidParameterValue, match="engine must be one of"):
        Broker(None, str(tmp_path / "x"), engine="fast")
    with pytest.raises(InvalidParameterValue, match="need a Spark session"):
        Broker(None, str(tmp_path / "x"), engine="spark")
    with pytest.raises(InvalidParameterValue, match="local disk"):
        Broker(None, "/Volumes/main/queues/files")
    assert broker.list_queues() == ["ordered.fifo", "plain"]


def test_a_second_native_broker_sees_the_same_queues_and_attributes(broker, tmp_path, clock):
    broker.create_queue("shared", visibility_timeout=45)
    other = Broker(None, str(tmp_path / "root"), clock=clock)
    assert other.get_queue("shared").attributes["visibility_timeout"] == 45
    other.get_queue("shared").set_attributes(visibility_timeout=90)
    assert Broker(None, broker.root).get_queue("shared").attributes["visibility_timeout"] == 90
    broker.delete_queue("shared")
    assert other.list_queues() == []


def _consume(queue, taken: list[str]) -> None:
    while messages := queue.receive(3, visibility_timeout=3600):
        taken.extend(m.message_id for m in messages)
        assert not queue.delete_batch([m.receipt_handle for m in messages]).failed


def test_native_threads_receive_each_message_once(broker):
    queue = broker.create_queue("contended")
    sent = queue.send_batch([f"m{i}" for i in range(60)])
    taken: list[str] = []
    threads = [threading.Thread(target=_consume, args=(queue, taken)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)
    assert queue.stats().in_flight == 0


CHILD = """
import json, sys
from sparkqueue import Broker
from tests.unit.test_native_engine import _consume

queue = Broker(None, sys.argv[1]).get_queue("shared")
taken = []
_consume(queue, taken)
print(json.dumps(taken))
"""


def test_native_processes_share_a_queue_and_lose_nothing(broker):
    queue = broker.create_queue("shared")
    sent = queue.send_batch([f"m{i}" for i in range(48)])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, broker.root], cwd=REPO, env=env, stdout=subprocess.PIPE
        )
        for _ in range(2)
    ]
    taken: list[str] = []
    _consume(queue, taken)
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0
        taken += json.loads(out)
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)


def test_a_producer_beside_consumers_loses_nothing_and_delivers_once(broker):
    """Consumers' shared rounds commit beside the producer's appends to their shards: delta-rs
    re-plans a round's predicate against each appended file, so the rules' predicates must
    survive that (a cast in one failed every such round with "Invalid function 'utf8'")."""
    queue = broker.create_queue("busy")
    sent: list[str] = []

    def produce() -> None:
        for i in range(30):
            sent.extend(queue.send_batch([f"p{i}-a", f"p{i}-b"]))

    taken = [m.message_id for m in produce_beside_consumers(queue, [produce], 3, 2)]
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)


def produce_beside_consumers(queue, producers, consumers: int, max_messages: int) -> list:
    """Runs the `producers` beside `consumers` threads that receive and delete until the
    producers are done and two receives in a row came back empty; returns what was delivered,
    in delivery order (noted before each delete)."""
    delivered: list = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    producing = threading.Event()
    producing.set()

    def consume() -> None:
        try:
            idle = 0
            while producing.is_set() or idle < 2:
                messages = queue.receive(max_messages, visibility_timeout=3600)
                idle = 0 if messages else idle + 1
                with lock:
                    delivered.extend(messages)
                if messages:
                    assert not queue.delete_batch([m.receipt_handle for m in messages]).failed
        except BaseException as error:
            errors.append(error)
            producing.clear()

    making = [threading.Thread(target=produce) for produce in producers]
    taking = [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in making + taking:
        thread.start()
    for thread in making:
        thread.join()
    producing.clear()
    for thread in taking:
        thread.join()
    assert errors == []
    return delivered


def test_every_file_the_native_engine_writes_keeps_the_columns_types(broker, clock):
    """DataFusion widens `int + 1` and an untyped -1 to 64-bit integers; a file holding those
    would be unreadable by Spark (which maps the table's int to 32 bits). Every write here:
    sends, a claim, a shared round (a retirement beside claims), releases, deletes, a purge."""
    queue = broker.create_queue("typed", visibility_timeout=30)
    queue.send_batch([f"m{i}" for i in range(6)])
    first, second = queue.receive(2)
    ctx, record = broker.context, broker.context.record("typed")
    finished = [handles.parse(record.secret, first.receipt_handle)]
    rounds.settle_and_claim(ctx, record, finished, 2, 30)  # one UPDATE: retire and claim
    queue.change_visibility(second.receipt_handle, 0)
    clock.advance(31)
    queue.delete_batch([m.receipt_handle for m in queue.receive(3)])
    queue.purge()
    expected = {f.name: f.type for f in arrow_schema(MESSAGE_COLUMNS) if f.name != "shard"}
    folder = record.location.removeprefix("file:")
    files = list(Path(folder).rglob("*.parquet"))
    assert len(files) >= 4
    for path in files:
        written = pq.read_schema(path)
        for name, wanted in expected.items():
            got = written.field(name).type
            if pa.types.is_string(wanted):
                assert pa.types.is_string(got) or pa.types.is_string_view(got), (path, name, got)
            else:
                assert got == wanted, (path.name, name, got)


EXCHANGE = """
import sys
from sparkqueue import Broker
from sparkqueue.engine.rounds import operations as rounds
from sparkqueue.rules import handles

queue = Broker(None, sys.argv[1]).create_queue("big", visibility_timeout=600)
for start in range(0, 20_000, 5_000):
    queue.send_batch([f"m{i}" for i in range(start, start + 5_000)])
ctx = queue._ctx
record = ctx.record("big")
first = rounds.settle_and_claim(ctx, record, [], 10_000, 600)
finished = [handles.parse(record.secret, m.receipt_handle) for m in first.claimed]
second = rounds.settle_and_claim(ctx, record, finished, 10_000, 600)
assert len(first.claimed) == len(second.claimed) == 10_000
assert not second.superseded and queue.stats().in_flight == 10_000
print("ok")
"""


def test_a_worker_loops_exchange_of_10000_completes(tmp_path):
    """One delta-rs UPDATE retiring 10,000 rows and claiming 10,000 overflowed delta-rs's stack
    and killed the process; such an exchange now retires and claims in two rounds. In a child
    process, so that a crash fails this test rather than the run."""
    done = subprocess.run(
        [sys.executable, "-c", EXCHANGE, str(tmp_path / "root")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok"


def test_concurrent_sends_of_one_broker_share_commits_and_each_gets_its_own_ids(broker):
    queue = broker.create_queue("producers")
    record = broker.context.record("producers")
    start = threading.Barrier(6, timeout=60)
    sent: dict[int, list[str]] = {}

    def produce(producer: int) -> None:
        start.wait()
        for n in range(5):
            ids = queue.send_batch([f"{producer}-{n}-a", f"{producer}-{n}-b"])
            sent.setdefault(producer, []).extend(ids)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    committer = broker.context.commits.of(f"{record.location}#sends", len)
    assert committer.carried == 30 and committer.rounds < 30  # shared appends
    bodies = {m["message_id"]: m["body"] for m in queue.peek(100)}
    assert len(bodies) == 60
    for producer, ids in sent.items():  # each caller got the ids of its own rows
        assert [bodies[i] for i in ids] == [f"{producer}-{n}-{x}" for n in range(5) for x in "ab"]

"""Compaction beside producers: on a local root, a broker merges the small files its sends leave
in a queue table, on a thread of its own, while consumers claim from it: threads of two brokers,
FIFO groups and killed producer processes. On object storage it does not (test_object_storage.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from sparkqueue import Broker
from sparkqueue.engine.messages import compaction
from sparkqueue.limits import SMALL_FILE_BYTES
from tests.unit import test_native_fifo
from tests.unit.test_native_engine import produce_beside_consumers

REPO = Path(__file__).resolve().parents[2]
OFTEN = 4  # appends between compactions here (COMPACT_AFTER_APPENDS)


@pytest.fixture
def often(monkeypatch):
    monkeypatch.setattr(compaction, "COMPACT_AFTER_APPENDS", OFTEN)


def table(broker: Broker, name: str) -> DeltaTable:
    return broker.context.native.open(broker.context.record(name).location)


def settled(broker: Broker, name: str, files: int, seconds: float = 60) -> list[str]:
    """The table's files once it holds at most `files` (a compaction runs beside the test)."""
    deadline = time.monotonic() + seconds
    while len(uris := table(broker, name).file_uris()) > files:
        assert time.monotonic() < deadline, f"{len(uris)} files after {seconds} s"
        time.sleep(0.05)
    return uris


def compactions(broker: Broker, name: str) -> int:
    return sum(entry["operation"] == "OPTIMIZE" for entry in table(broker, name).history())


def drain(queue) -> list[str]:
    taken = []
    while messages := queue.receive(100, visibility_timeout=3600):
        taken += [m.message_id for m in messages]
        assert not queue.delete_batch([m.receipt_handle for m in messages]).failed
    return taken


def test_a_producers_small_files_are_merged_and_large_ones_left(broker, often):
    queue = broker.create_queue("busy", shards=1)
    large = queue.send_batch([os.urandom(1000).hex() for _ in range(100)])  # one file, > 64 KiB
    (first,) = table(broker, "busy").file_uris()
    sizes = table(broker, "busy").get_add_actions(flatten=True).column("size_bytes")
    assert sizes[0].as_py() > SMALL_FILE_BYTES
    small = [queue.send(f"m{i}") for i in range(6 * OFTEN)]  # a file each
    files = settled(broker, "busy", 1 + 2 * OFTEN)
    assert first in files  # left as it was
    assert sorted(drain(queue)) == sorted(large + small)


def test_threads_of_two_brokers_beside_compactions_take_every_message_once(broker, often):
    other = Broker(None, broker.root, clock=broker.context.clock)
    queue = broker.create_queue("shared", visibility_timeout=3600)
    theirs = other.get_queue("shared")
    sent: list[str] = []
    lock = threading.Lock()

    def produce(on) -> None:
        for i in range(16):
            ids = on.send_batch([f"p{i}-a", f"p{i}-b"]) if i % 2 else [on.send(f"p{i}")]
            with lock:
                sent.extend(ids)

    producers = [lambda: produce(queue), lambda: produce(theirs)]
    taken = [m.message_id for m in produce_beside_consumers(theirs, producers, 3, 4)]
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)
    assert compactions(broker, "shared") > 0  # beside the consumers


def test_fifo_groups_keep_their_order_beside_compactions(broker, often):
    test_native_fifo.test_concurrent_producers_and_consumers_keep_each_groups_order(broker)
    assert compactions(broker, "orders.fifo") > 0


def test_a_failed_compaction_is_the_senders_concern_no_more(monkeypatch):
    """A compaction runs off the send it follows: its failure reaches no one, and the next one
    is due as usual. A queue being deleted waits for a compaction that runs."""
    monkeypatch.setattr(compaction, "COMPACT_AFTER_APPENDS", 1)
    files = compaction.SmallFiles()
    ran: list[str] = []
    started, release = threading.Event(), threading.Event()

    def failing() -> None:
        ran.append("failing")
        raise OSError("the store did not answer")

    def slow() -> None:
        ran.append("slow")
        started.set()
        release.wait(10)

    files.appended("t", failing)  # raises nothing
    files.settle("t")
    files.appended("t", slow)
    assert started.wait(10)
    settled = threading.Event()
    waiting = threading.Thread(target=lambda: (files.settle("t"), settled.set()))
    waiting.start()
    assert not settled.wait(0.2)  # the compaction still runs
    release.set()
    assert settled.wait(10)
    waiting.join()
    assert ran == ["failing", "slow"]


PRODUCER = """
import sys
from sparkqueue import Broker
from sparkqueue.engine.messages import compaction

compaction.COMPACT_AFTER_APPENDS = 2
queue = Broker(None, sys.argv[1]).get_queue("shared")
for n in range(60):
    print(queue.send(f"{sys.argv[2]}-{n}"), flush=True)
"""


def test_killed_producer_processes_beside_compactions_lose_nothing(broker):
    """Two processes send a message at a time (compacting every other append) while this one
    drains the queue; one is killed halfway. Every message a producer was told it sent arrives,
    once."""
    broker.create_queue("shared", visibility_timeout=3600)
    queue = Broker(None, broker.root).get_queue("shared")  # on the producers' clock
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCER, broker.root, name],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("kept", "killed")
    ]
    told: dict[str, list[str]] = {"kept": [], "killed": []}

    def read(name: str, producer: subprocess.Popen) -> None:
        for line in producer.stdout:
            told[name].append(line.strip())
            if name == "killed" and len(told[name]) == 30:
                producer.send_signal(signal.SIGKILL)

    readers = [
        threading.Thread(target=read, args=pair) for pair in zip(told, producers, strict=True)
    ]
    for reader in readers:
        reader.start()
    taken: list[str] = []
    while any(producer.poll() is None for producer in producers):
        taken += drain(queue)
    for reader in readers:
        reader.join()
    taken += drain(queue)
    assert producers[0].returncode == 0 and producers[1].returncode == -signal.SIGKILL
    assert len(told["kept"]) == 60 and len(told["killed"]) >= 30
    counts = Counter(taken)
    assert max(counts.values()) == 1, counts.most_common(3)  # nothing twice
    assert set(told["kept"] + told["killed"]) <= set(counts)  # nothing a producer was told is lost
    assert len(counts) <= 60 + len(told["killed"]) + 1  # at most the send the kill cut short
    assert compactions(broker, "shared") > 0


def test_a_process_that_ends_as_its_sends_compaction_starts_waits_for_it(broker):
    """The compaction's thread is no daemon, though the send that starts it runs on one: the
    process ends after the compaction, not in the middle of it (which crashed it: SIGSEGV)."""
    broker.create_queue("ending", shards=1)  # each send's file in the one shard: two to merge
    script = (
        "import sys\n"
        "from sparkqueue import Broker\n"
        "from sparkqueue.engine.messages import compaction\n"
        "compaction.COMPACT_AFTER_APPENDS = 2\n"
        "queue = Broker(None, sys.argv[1]).get_queue('ending')\n"
        "queue.send('one')\n"
        "queue.send('two')\n"  # the second append starts the compaction: the process ends
    )
    for run in range(1, 4):
        done = subprocess.run(
            [sys.executable, "-c", script, broker.root],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0
        assert compactions(broker, "ending") == run  # the process's compaction committed


@pytest.mark.parametrize("first", ["compaction", "update", "delete"])
def test_delta_rs_refuses_a_claim_or_a_compaction_read_before_the_other_committed(tmp_path, first):
    """Why the redrive job's upkeep may compact on object storage beside other processes' claims
    and deletes, with no lock (only the lease that keeps compactions apart): whichever commits
    second, read before the other committed, is refused, and the table holds each row once."""
    for i in range(3):
        write_deltalake(str(tmp_path), pa.table({"id": [i], "v": ["a"]}), mode="append")
    stale, fresh = DeltaTable(str(tmp_path)), DeltaTable(str(tmp_path))
    acts = {
        "compaction": lambda table: table.optimize.compact(),
        "update": lambda table: table.update(predicate="id = 1", updates={"v": "'claimed'"}),
        "delete": lambda table: table.delete("id = 1"),
    }
    second = ["compaction"] if first != "compaction" else ["update", "delete"]
    acts[first](fresh)
    for name in second:
        with pytest.raises(CommitFailedError):
            acts[name](stale)
    ids = DeltaTable(str(tmp_path)).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == ([0, 2] if first == "delete" else [0, 1, 2])


def test_delta_rs_commits_two_compactions_from_one_version_both(tmp_path):
    """Why a compaction beside producers runs only alone under a local root's lock
    (QueueContext.appended), and upkeep on object storage under the table's compaction lease:
    when delta-rs refuses the second of two compactions read from one version, this fails."""
    for i in range(3):
        write_deltalake(str(tmp_path), pa.table({"id": [i]}), mode="append")
    first, second = DeltaTable(str(tmp_path)), DeltaTable(str(tmp_path))
    first.optimize.compact()
    second.optimize.compact()  # from the version before the first: it should conflict
    assert DeltaTable(str(tmp_path)).to_pyarrow_table().num_rows == 6  # every row twice

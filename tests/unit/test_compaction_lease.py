"""Compaction's lease on object storage (store/native_upkeep.py `compacting`): delta-rs commits
two compactions read from one version both (tests/unit/test_small_files.py's tripwire), so the
upkeep of two processes must never compact one table at once. These run on S3 (moto's server);
tests/unit/test_object_storage_azure.py runs them again on Azure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime

import pytest

from sparkqueue import Broker
from sparkqueue.services.redrive import Redrive
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings
from sparkqueue.store.native_leases import lease_app_id
from sparkqueue.testing import FakeClock
from tests.processes import REPO
from tests.unit.conftest import near_wall_clock
from tests.unit.test_small_files import compactions


@pytest.fixture
def clock() -> FakeClock:
    return near_wall_clock()


@pytest.fixture
def root(s3, monkeypatch) -> str:
    for name, value in s3.options.items():
        monkeypatch.setenv(name, value)
    return f"{s3.new_bucket()}/queues"


@pytest.fixture
def broker(root, clock) -> Broker:
    return Broker(None, root, clock=clock)


def where(broker: Broker, name: str) -> str:
    broker.create_queue(name)
    return broker.context.record(name).location


def test_a_tables_compaction_lease_has_one_holder_and_is_given_back(broker, clock):
    location = where(broker, "leased")
    native = broker.context.native
    with (
        native.compacting(location, clock) as first,
        native.compacting(location, clock) as second,
    ):
        assert first is not None and second is None
    with native.compacting(location, clock) as again:
        assert again is not None
    assert recorded(broker, location) == 0  # given back: free
    assert len(native.open(location).history()) == 1  # the queue's own log is not written


def test_the_lease_tables_log_is_checkpointed_and_trimmed(s3, broker, clock):
    location = where(broker, "often")
    native = broker.context.native
    for _ in range(11):  # 22 commits after the creation
        with native.compacting(location, clock) as hold:
            assert hold is not None
    assert native.open(native.layout.leases).version() == 22
    bucket, prefix = native.layout.leases.removeprefix("s3://").split("/", 1)
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/_delta_log/")
    keys = [item["Key"].rsplit("/", 1)[-1] for item in listed["Contents"]]
    assert f"{20:020d}.checkpoint.parquet" in keys  # and the trim after it found nothing old


def recorded(broker: Broker, location: str) -> int | None:
    native = broker.context.native
    return native.open(native.layout.leases).transaction_version(lease_app_id(location))


def test_of_two_processes_that_read_one_version_only_one_takes_the_lease(root, clock):
    """Both read the version before either commits (a barrier after each one's first read):
    Delta's conflict check refuses the second commit recording the app id, and its retry finds
    the lease held."""
    brokers = [Broker(None, root, clock=clock) for _ in range(2)]
    location = where(brokers[0], "raced")
    for broker in brokers:
        with broker.context.native.compacting(location, clock):
            pass  # the lease table exists, and each knows it
    both_read = threading.Barrier(2)
    for native in (broker.context.native for broker in brokers):
        native.open = _first_read_waits_for(native.open, both_read)  # type: ignore[method-assign]
    taken: list[bool] = []
    leases = []  # held to the end: neither gives it back (a lease dropped is given back)

    def take(broker: Broker) -> None:
        leases.append(lease := broker.context.native.compacting(location, clock))
        taken.append(lease.__enter__() is not None)

    threads = [threading.Thread(target=take, args=(broker,)) for broker in brokers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(taken) == [False, True]
    assert sum(broker.context.native.conflicts.value for broker in brokers) == 1  # the loser's
    for broker in brokers:
        del broker.context.native.open  # the barrier's patch, before the holder gives back
    for lease in leases:
        lease.__exit__(None, None, None)


def _first_read_waits_for(open_table, barrier: threading.Barrier):
    first = threading.local()

    def opened(address: str):
        table = open_table(address)
        if not getattr(first, "done", False):
            first.done = True
            barrier.wait(timeout=30)
        return table

    return opened


def test_a_lease_is_renewed_as_it_is_kept_and_lapses_when_its_holder_stalls(broker, clock):
    location = where(broker, "lapsing")
    native = broker.context.native
    stalled = native.compacting(location, clock)
    hold = stalled.__enter__()  # its process stalls holding it (or dies: nothing gives it back)
    first_end = recorded(broker, location)
    clock.advance(6 * 60)
    assert hold.keep() and recorded(broker, location) == first_end  # not half gone: no commit
    clock.advance(3 * 60)
    assert hold.keep() and recorded(broker, location) > first_end  # renewed from now
    clock.advance(14 * 60)
    with native.compacting(location, clock) as early:
        assert early is None
    clock.advance(2 * 60)  # past the 15 minutes of the renewed lease
    successor = native.compacting(location, clock)
    assert successor.__enter__() is not None
    assert not hold.keep()  # the stalled holder, back too late, stops compacting
    stalled.__exit__(None, None, None)  # and gives back only its own lease: nothing
    with native.compacting(location, clock) as third:
        assert third is None
    successor.__exit__(None, None, None)
    with native.compacting(location, clock) as free:
        assert free is not None


def test_a_lease_taken_though_the_stores_answer_was_lost_is_held_and_given_back(s3, broker, clock):
    location = where(broker, "unanswered")
    native = broker.context.native
    with native.compacting(location, clock):
        pass  # the lease table exists: the next put is the take's
    s3.lose_answers(1, "")
    with native.compacting(location, clock) as hold:
        assert hold is not None and recorded(broker, location) == hold.until
    assert recorded(broker, location) == 0


def test_a_redrive_pass_leaves_compaction_to_the_leases_holder(broker, clock):
    queue = broker.create_queue("upkept", shards=1)
    for i in range(3):
        queue.send(f"m{i}")  # a file each
    settings = RedriveSettings(defaults=UpkeepSettings(upkeep_every_seconds=600))
    Redrive(broker.context, settings).run(["upkept"])  # the first pass only notes the time
    clock.advance(601)
    native = broker.context.native
    with native.compacting(broker.context.record("upkept").location, clock) as held:
        assert held is not None  # another process's, say
        report = Redrive(broker.context, settings).run(["upkept"]).queues["upkept"]
    assert report.upkeep and compactions(broker, "upkept") == 0
    clock.advance(601)
    assert Redrive(broker.context, settings).run(["upkept"]).queues["upkept"].upkeep
    assert compactions(broker, "upkept") == 1


# A process's upkeep, as the redrive job's native path runs it (services/tidy.py): two sends (a
# small file each), then upkeep under the lease, at the same moments as its peer's.
CHILD = """
import contextlib, json, sys, time
from datetime import UTC, datetime
from sparkqueue import Broker
from sparkqueue.services.settings import UpkeepSettings
from sparkqueue.services.tidy import tidy_table

root, start, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
broker = Broker(None, root)
queue, native = broker.get_queue("shared"), broker.context.native
location = broker.context.record("shared").location
sent, held = [], []

@contextlib.contextmanager
def lease(path):
    with native.compacting(path, lambda: datetime.now(UTC)) as hold:
        held.append(hold is not None)
        yield hold

for number in range(rounds):
    sent += [queue.send("a"), queue.send("b")]
    time.sleep(max(0.0, start + 3 * number - time.time()))
    tidy_table(native, location, UpkeepSettings(), lease=lease)
print(json.dumps({"sent": sent, "held": held}))
"""


def test_upkeep_of_two_processes_never_compacts_a_table_twice(broker):
    """Without the lease, two processes compacting from one version each add a merged copy of
    the same rows: messages would be delivered twice."""
    queue = broker.create_queue("shared", shards=1)
    sent = queue.send_batch([f"m{i}" for i in range(10)])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = datetime.now(UTC).timestamp() + 10  # both interpreters are up by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, broker.root, str(start), "4"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outcomes = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0
        outcomes.append(json.loads(out))
    sent += [message_id for outcome in outcomes for message_id in outcome["sent"]]
    held = [taken for outcome in outcomes for taken in outcome["held"]]
    assert True in held and False in held, held  # they met, and one gave way each time
    taken = []
    queue = Broker(None, broker.root).get_queue("shared")  # on the wall clock, as the children
    while messages := queue.receive(10, visibility_timeout=3600):
        taken += [m.message_id for m in messages]
    assert sorted(taken) == sorted(sent), Counter(taken).most_common(3)

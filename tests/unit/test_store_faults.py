"""Every kind of fault a store's network makes, on every kind of native operation, on S3 (moto's
server) and Azure (Azurite), through the fault-injecting proxy (sparkqueue/bench/faults.py): a
lost answer after the store acted, 500, 503, a reset connection, a stall past the client's
timeout, slow answers. Each operation (a compaction lease's take and give-back among them) must
succeed and have happened once, or fail clearly and not have happened; nothing is lost, nothing
is handed out twice, nothing reaches a dead-letter queue undelivered. The default run takes
`DEFAULT_KINDS`; `--fault-kinds all` every kind."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from sparkqueue import Broker
from sparkqueue.bench.faults import COMMITS, Target, fault_proxy
from sparkqueue.engine.messages import bulk
from sparkqueue.errors import QueueDoesNotExist, QueueError
from sparkqueue.testing import FakeClock
from tests.fault_cases import fault_kinds, redrive_move

# The kinds whose outcome rests on sparkqueue's own code: an answer lost after the store acted
# and a reset connection (a commit searches the log for itself), and a stall past the client's
# timeout (a commit whose answer never came searches the log like a lost one). 500s, 503s and
# slow answers are object_store's own
# retries: `--fault-kinds all` runs them too.
DEFAULT_KINDS = ("lose", "reset", "stall")
CLIENT_TIMEOUT = "2s"  # object_store's per request: a stall outlasts it
STALL_SECONDS = 3.0
SLOW_SECONDS = 0.02
PUT, REMOVALS = frozenset({"PUT"}), frozenset({"DELETE", "POST"})


def _create_queue(broker: Broker, faulted: Callable) -> None:
    # the queue table's first version, not the registry's commit before it
    faulted(
        lambda: broker.create_queue("made"), Target(PUT, r"/made-[^/]+/_delta_log/0{20}\.json$")
    )
    assert [q for q in broker.list_queues() if q == "made"] == ["made"]
    broker.get_queue("made").send("works")
    assert [m.body for m in broker.get_queue("made").receive(10)] == ["works"]


def _send(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("sends")
    sent = faulted(lambda: queue.send("once"))
    [message] = queue.receive(10)
    assert (message.message_id, message.body) == (sent, "once")
    assert queue.receive(10) == []


def _fifo_send(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("orders.fifo", fifo=True)
    sent = faulted(lambda: queue.send("once", group_id="g", deduplication_id="d"))
    assert queue.send("once", group_id="g", deduplication_id="d") == sent  # a caller's retry
    assert [m.message_id for m in queue.receive(10)] == [sent]


def _send_batch(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("batches")
    ids = faulted(lambda: queue.send_batch(["a", "b", "c"]))
    assert sorted(m.message_id for m in queue.receive(10)) == sorted(ids)


def _receive(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("receives")
    sent = set(queue.send_batch(["a", "b", "c"]))
    [first] = faulted(lambda: queue.receive(1))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (2, 1)  # nothing held under a handle never given
    rest = queue.receive(10)
    assert {m.message_id for m in [first, *rest]} == sent
    assert {m.receive_count for m in [first, *rest]} == {1}
    for message in [first, *rest]:
        queue.delete(message.receipt_handle)
    assert queue.stats().in_flight == 0


def _stream_claim(broker: Broker, faulted: Callable) -> None:
    """A streaming batch's claim (and a native receive_df's): one UPDATE by id range, whose
    rows its tasks then read at the table version the claim's commit wrote."""
    queue = broker.create_queue("streamed")
    queue.send_batch([f"m{i}" for i in range(5)])
    ctx, record = broker.context, broker.context.record("streamed")
    claim, version = faulted(
        lambda: bulk.claim_oldest(ctx, record, 3, 600), Target.commits_of(record.location)
    )
    shards = sorted({shard for shard, _, _ in claim.bounds})
    # a retried claim may take fewer (each retry asks for half): what it took, it holds alone
    assert bulk.read_held(ctx.native, record, [claim], shards, version).num_rows == claim.count
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (5 - claim.count, claim.count) != (5, 0)


def _delete(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("deletes")
    queue.send("gone")
    [message] = queue.receive(1)
    faulted(lambda: queue.delete(message.receipt_handle))
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0)


def _change_visibility(broker: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("visibility")
    queue.send("back")
    [message] = queue.receive(1)
    faulted(lambda: queue.change_visibility(message.receipt_handle, 0))
    [again] = queue.receive(1)
    assert (again.message_id, again.receive_count) == (message.message_id, 2)


def _redrive_move(broker: Broker, faulted: Callable, clock: FakeClock) -> None:
    def redrive() -> None:  # aimed at the move's copy (the pass creates its metrics table first)
        dead = broker.context.record("dead").location
        faulted(broker.redrive, Target.commits_of(dead))

    redrive_move(broker, clock, redrive)


def _delete_queue(broker: Broker, faulted: Callable) -> None:
    broker.create_queue("dropped").send("x")
    # the folder's removal: S3's DeleteObjects, Azure's batch of deletes
    faulted(lambda: broker.delete_queue("dropped"), Target(REMOVALS, r"[?&]delete|comp=batch"))
    assert "dropped" not in broker.list_queues()
    with pytest.raises(QueueDoesNotExist):
        broker.get_queue("dropped")


def _compaction_lease(broker: Broker, faulted: Callable) -> None:
    """A table's compaction lease taken and given back: commits to the root's lease table."""
    broker.create_queue("compacted")
    location, native = broker.context.record("compacted").location, broker.context.native
    leases = Target.commits_of(native.layout.leases)
    with contextlib.ExitStack() as held:
        hold = faulted(lambda: held.enter_context(native.compacting(location, broker.context.now)),
                       leases)  # fmt: skip
        assert hold is not None
        with native.compacting(location, broker.context.now) as other:
            assert other is None  # held once
        faulted(held.close, leases)  # given back
    with native.compacting(location, broker.context.now) as again:
        assert again is not None  # free again, not left to lapse


OPERATIONS = [
    _create_queue, _send, _fifo_send, _send_batch, _receive, _stream_claim, _delete,
    _change_visibility, _redrive_move, _delete_queue, _compaction_lease,
]  # fmt: skip


@pytest.fixture(params=["s3", "azure"])
def store(request):
    """(the store's address, its delta-rs options, a new root's factory)."""
    if request.param == "s3":
        server = request.getfixturevalue("s3")
        return server.url, "AWS_ENDPOINT_URL", server.options, lambda: f"{server.new_bucket()}/q"
    server = request.getfixturevalue("azure")
    return server.url, "AZURITE_BLOB_STORAGE_URL", server.options, server.new_container


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kind" in metafunc.fixturenames:
        metafunc.parametrize("kind", fault_kinds(metafunc.config, DEFAULT_KINDS))


def test_every_operation_succeeds_once_or_fails_cleanly_under_each_fault(store, kind, monkeypatch):
    address, endpoint_key, options, new_root = store
    outcomes = {}
    with fault_proxy(address, stall_seconds=STALL_SECONDS) as proxy:
        faulted_options = {**options, endpoint_key: proxy.url, "timeout": CLIENT_TIMEOUT}
        for name, value in faulted_options.items():  # Azurite's address: the environment only
            monkeypatch.setenv(name, value)
        for operation in OPERATIONS:
            clock = FakeClock()
            broker = Broker(None, new_root(), storage_options=faulted_options, clock=clock)

            def faulted(call, target=COMMITS, name=operation.__name__):
                if kind == "slow":
                    proxy.slow(SLOW_SECONDS)
                else:
                    proxy.arm(kind, target)
                try:
                    return call()
                except QueueError as error:  # a clear error: then it did not happen
                    outcomes[name] = type(error).__name__
                    raise
                finally:
                    assert proxy.armed() == 0, "the fault never met the operation's request"
                    proxy.disarm()

            if operation is _redrive_move:
                operation(broker, faulted, clock)
            else:
                operation(broker, faulted)
            outcomes.setdefault(operation.__name__, "ok")
        assert proxy.tally()[kind] >= len(OPERATIONS)
    assert set(outcomes.values()) == {"ok"}, outcomes

"""The native engine on Azure: queues under an az:// root, served by delta-rs alone against
Azurite (tests/azurite.py), with no JVM. A commit there is a put with `If-None-Match: *`, as on
S3. The native engine's semantics, several-thread and several-process tests imported below run
here again on such a root: their `broker` is this module's. Spark's side of Azure is not tested:
Azurite has no ADLS Gen2 (DFS) API for Hadoop's ABFS client."""

from __future__ import annotations

import pytest

from sparkqueue import Broker
from sparkqueue.testing import FakeClock
from tests.unit.conftest import near_wall_clock
from tests.unit.test_compaction_lease import (  # noqa: F401 (collected here, on Azure)
    test_upkeep_of_two_processes_never_compacts_a_table_twice,
)
from tests.unit.test_native_engine import (  # noqa: F401 (collected here, on Azure)
    test_a_broker_without_spark_serves_every_per_message_operation,
    test_native_processes_share_a_queue_and_lose_nothing,
    test_native_threads_receive_each_message_once,
)
from tests.unit.test_native_fifo import (  # noqa: F401
    test_concurrent_producers_and_consumers_keep_each_groups_order,
)


@pytest.fixture
def clock() -> FakeClock:
    return near_wall_clock()


@pytest.fixture
def credentials(azure, monkeypatch) -> dict[str, str]:
    """The emulator's account and address in this process's environment (and its children's)."""
    for name, value in azure.options.items():
        monkeypatch.setenv(name, value)
    return azure.options


@pytest.fixture
def root(azure, credentials) -> str:
    return f"{azure.new_container()}/queues"


@pytest.fixture
def broker(root, clock) -> Broker:
    return Broker(None, root, clock=clock)


def test_a_root_on_azure_is_the_native_engines(broker, root):
    assert (broker.engine, broker.root) == ("native", root)
    queue = broker.create_queue("jobs")
    queue.send("a")
    [message] = queue.receive(1)
    queue.delete(message.receipt_handle)
    assert queue.stats().visible == 0

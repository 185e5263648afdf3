"""A real `SqsEndpoint` (real sockets, threads, SigV4 checks, both protocols) over a broker that
needs no JVM: the transport and authentication checks run before any action touches the broker,
so a broker that records every call shows whether a refused request reached anything at all."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from sparkqueue.endpoint import AccessKeys, SqsEndpoint
from sparkqueue.errors import QueueDoesNotExist
from tests.raw_http import ACCESS_KEY, SECRET_KEY

KEYS = AccessKeys({ACCESS_KEY: SECRET_KEY})
NO_KEYS = AccessKeys({})


class StubQueue:
    """A queue found by name whose every use finds it gone (as if deleted meanwhile)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        raise QueueDoesNotExist(f"the queue {self.name!r} is gone")


class RecordingBroker:
    """Stands in for a Broker holding the queue names in `queues` (none readable): records each
    call that reaches it. A request that reaches it passed every check before the actions."""

    def __init__(self, *queues: str) -> None:
        self.queues = list(queues)
        self.calls: list[tuple[str, Any]] = []

    def list_queues(self, prefix: str = "") -> list[str]:
        self.calls.append(("list_queues", prefix))
        return [q for q in self.queues if q.startswith(prefix)]

    # what the actions read to keep the server's storage location out of error texts
    context = SimpleNamespace(tables=SimpleNamespace(layout=SimpleNamespace(local_dir=None)))
    spark = SimpleNamespace()  # as a broker with Spark: its queues are served as they are
    root = None  # as a catalog's broker: every region's requests reach it

    def get_queue(self, name: str) -> Any:
        self.calls.append(("get_queue", name))
        if name not in self.queues:
            raise QueueDoesNotExist(f"there is no queue {name!r} here")
        return StubQueue(name)

    def delete_queue(self, name: str) -> None:
        self.calls.append(("delete_queue", name))
        self.queues.remove(name)


@contextmanager
def serving(broker: RecordingBroker, keys: AccessKeys = KEYS, **options: Any) -> Iterator[Any]:
    """The endpoint on a free localhost port, on a background thread, until the block ends."""
    with SqsEndpoint(broker, port=0, access_keys=keys, **options) as endpoint:  # type: ignore[arg-type]
        yield endpoint

"""What a message's history costs: each operation's price with the change data feed on (the
alternative not taken) against the plain table `Queue.history` reads, interleaved in one run on
one engine (an A/B), and what reading a history takes; and how fast the console's pages answer.

    python -m sparkqueue.bench --only history --engine native --operations 200
    python -m sparkqueue.bench --only console --page-reads 30
"""

from __future__ import annotations

import http.client
import re
import time
from collections.abc import Callable
from typing import Any

from ..broker import Broker
from ..endpoint import AccessKeys, SqsEndpoint
from .backlog import fill, set_table_properties
from .timing import p50_ms, timed

CHANGE_DATA_FEED = {"delta.enableChangeDataFeed": "true"}
HISTORY_READS = 20
PAGE_READS = 30


def history_cost(broker: Broker, operations: int) -> dict[str, Any]:
    """receive(1) + delete p50 on a plain queue and on one with the change data feed, one
    operation of each in turn; then `history` p50 over messages of the plain queue."""
    queues = {
        "plain": broker.create_queue("history-plain"),
        "cdf": broker.create_queue("history-cdf"),
    }
    set_table_properties(broker, "history-cdf", CHANGE_DATA_FEED)
    for queue in queues.values():
        fill(broker, queue, operations + 10)
    times: dict[str, dict[str, list[float]]] = {k: {"receive": [], "delete": []} for k in queues}
    handled: list[str] = []
    for _ in range(operations):
        for kind, queue in queues.items():
            started = time.perf_counter()
            [message] = queue.receive(1, visibility_timeout=3_600)
            received = time.perf_counter()
            queue.delete(message.receipt_handle)
            times[kind]["receive"].append(received - started)
            times[kind]["delete"].append(time.perf_counter() - received)
            if kind == "plain":
                handled.append(message.message_id)
    reads = []
    for message_id in handled[:: max(1, len(handled) // HISTORY_READS)][:HISTORY_READS]:
        started = time.perf_counter()
        events = queues["plain"].history(message_id)
        reads.append(time.perf_counter() - started)
        assert [e.kind for e in events][-2:] == ["received", "deleted"], events
    return {
        "operations": operations,
        **{f"{k}_{op}_p50_ms": p50_ms(v[op]) for k, v in times.items() for op in v},
        "history_p50_ms": p50_ms(reads),
        "history_max_ms": max(reads) * 1000,
        "versions": len(handled) * 2,
    }


def console_pages(root: str, reads: int = PAGE_READS) -> dict[str, Any]:
    """p50 of `reads` GETs of each console page on a native broker: ten queues, one with a dead-letter queue
    holding twenty messages, a message's history, the depth chart over a few passes."""
    broker = Broker(None, root)
    broker.create_queue("console-dlq")
    source = broker.create_queue("console", dead_letter_queue="console-dlq", max_receive_count=1)
    for i in range(8):
        fill(broker, broker.create_queue(f"other-{i}"), 10)
    ids = source.send_batch([f"message {i}" for i in range(20)])
    for _ in range(2):
        source.receive(10, visibility_timeout=0)
    for _ in range(3):
        broker.redrive()
    pages = {
        "queues": "/console/",
        "queue": "/console/queues/console",
        "dead letters": "/console/queues/console-dlq/dead-letters",
        "history": f"/console/queues/console/messages/{ids[0]}",
        "depth chart": "/console/queues/console/depth.svg",
        "live rows": "/console/fragments/queues",
    }
    with SqsEndpoint(
        broker, port=0, access_keys=AccessKeys({}), redrive_every=0, console=True
    ) as served:
        get = _client(served.port)
        get("/console/")  # the session's cookie
        return {
            name: p50_ms([timed(lambda p=path: get(p))[0] for _ in range(reads)])
            for name, path in pages.items()
        }


def _client(port: int) -> Callable[[str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    cookie: dict[str, str] = {}

    def get(path: str) -> bytes:
        connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **cookie})
        answer = connection.getresponse()
        body = answer.read()
        assert answer.status == 200, (path, answer.status, body[:200])
        if answer.getheader("Set-Cookie"):
            cookie["Cookie"] = re.split(";", answer.getheader("Set-Cookie"))[0]
        return body

    return get

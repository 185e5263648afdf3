"""The SQS endpoint scenario: clients on threads, each looping send, receive, delete, first through
the endpoint served in this process (boto3, signed requests, the JSON protocol), then straight on
`Queue` in this driver for comparison, each with 1 client and with 8. Figures: each call's p50,
and whole send-receive-delete cycles per second. The peers scenario runs the same loop against
moto's SQS server.

    python -m sparkqueue.bench --only endpoint --engine native --endpoint-seconds 30
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..broker import Broker
from .backlog import BODY_BYTES
from .window import during_window

ACCESS_KEY, SECRET_KEY = "bench", "bench-secret"
CLIENTS = (1, 8)


@dataclass(frozen=True)
class Calls:
    """One client's three calls: send a message, receive up to one (its handles), delete one."""

    send: Callable[[], Any]
    receive: Callable[[], list[str]]
    delete: Callable[[str], Any]


def sqs_client(endpoint_url: str) -> Any:
    """A boto3 SQS client of the benchmark's access key (boto3 is the dev extra's)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sqs",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(max_pool_connections=2),
    )


def over_http(queue_url: str, endpoint_url: str) -> Calls:
    """A boto3 client's calls on one queue of an SQS API (ours, or a peer's in the peers
    scenario): send, receive waiting up to a second, delete."""
    client = sqs_client(endpoint_url)
    return Calls(
        lambda: client.send_message(QueueUrl=queue_url, MessageBody="x" * BODY_BYTES),
        lambda: [
            m["ReceiptHandle"]
            for m in client.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get(
                "Messages", []
            )
        ],
        lambda handle: client.delete_message(QueueUrl=queue_url, ReceiptHandle=handle),
    )


def endpoint_load(broker: Broker, seconds: float) -> dict[str, Any]:
    from ..endpoint import AccessKeys, SqsEndpoint

    def direct(name: str) -> Calls:
        queue = broker.get_queue(name)
        return Calls(
            lambda: queue.send("x" * BODY_BYTES),
            lambda: [m.receipt_handle for m in queue.receive(1, wait_time_seconds=1)],
            queue.delete,
        )

    results: dict[str, Any] = {}
    keys = AccessKeys.parse(f"{ACCESS_KEY}:{SECRET_KEY}")
    with SqsEndpoint(broker, port=0, access_keys=keys) as served:
        results["get_queue_url_p50_ms"] = _no_table_call(sqs_client(served.url))
        for count in CLIENTS:
            name = f"endpoint-{count}"
            broker.create_queue(name)
            queue_url = f"{served.url}/{served.service.naming.account}/{name}"
            clients = [over_http(queue_url, served.url) for _ in range(count)]
            results[f"http_{count}"] = cycles(clients, seconds)
    for count in CLIENTS:
        name = f"direct-{count}"
        broker.create_queue(name)
        results[f"direct_{count}"] = cycles([direct(name) for _ in range(count)], seconds)
    return results


def _no_table_call(client: Any, calls: int = 20) -> float:
    """GetQueueUrl's p50: a call that reads no table, so what HTTP and signing cost."""
    client.create_queue(QueueName="no-table")
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        client.get_queue_url(QueueName="no-table")
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


def cycles(clients: list[Calls], seconds: float) -> dict[str, Any]:
    """Each client on a thread of its own, looping send, receive, delete for `seconds`: each
    call's p50 (ms), and the messages that went round per second."""
    calls: dict[str, list[float]] = {"send": [], "receive": [], "delete": []}
    done: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def loop(client: Calls) -> None:
        mine: dict[str, list[float]] = {name: [] for name in calls}
        cycles = 0
        while not stop.is_set():
            started = time.perf_counter()
            client.send()
            sent = time.perf_counter()
            handles = client.receive()
            received = time.perf_counter()
            for handle in handles:
                client.delete(handle)
            deleted = time.perf_counter()
            mine["send"].append(sent - started)
            mine["receive"].append(received - sent)
            if handles:
                mine["delete"].append((deleted - received) / len(handles))
            cycles += len(handles)
        with lock:
            for name, values in mine.items():
                calls[name].extend(values)
            done.append(cycles)

    during_window([functools.partial(loop, client) for client in clients], seconds, stop)
    return {
        **{f"{name}_p50_ms": statistics.median(v) * 1000 for name, v in calls.items() if v},
        "messages_per_s": sum(done) / seconds,
    }

"""The SQS endpoint scenario: boto3 clients on threads, each looping send, receive, delete
through an endpoint served in this process (signed requests, the JSON protocol), with 1 client
and with 8. Figures: each call's p50, and whole send-receive-delete cycles per second."""

from __future__ import annotations

import functools
import statistics
import threading
import time
from typing import Any

from ..broker import Broker
from .scenarios import during_window

ACCESS_KEY, SECRET_KEY = "bench", "bench-secret"


def endpoint_load(
    broker: Broker, seconds: float, clients_counts: tuple[int, ...] = (1, 8)
) -> dict[str, Any]:
    import boto3  # the dev extra's; only this scenario needs it
    from botocore.config import Config

    from ..endpoint import AccessKeys, SqsEndpoint

    keys = AccessKeys.parse(f"{ACCESS_KEY}:{SECRET_KEY}")
    results: dict[str, Any] = {}
    with SqsEndpoint(broker, port=0, access_keys=keys) as served:
        for count in clients_counts:
            clients = [
                boto3.client(
                    "sqs",
                    endpoint_url=served.url,
                    region_name="us-east-1",
                    aws_access_key_id=ACCESS_KEY,
                    aws_secret_access_key=SECRET_KEY,
                    config=Config(max_pool_connections=2),
                )
                for _ in range(count)
            ]
            url = clients[0].create_queue(QueueName=f"endpoint-{count}")["QueueUrl"]
            results[f"clients_{count}"] = _cycles(clients, url, seconds)
    return results


def _cycles(clients: list[Any], url: str, seconds: float) -> dict[str, Any]:
    calls: dict[str, list[float]] = {"send": [], "receive": [], "delete": []}
    done: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def loop(client: Any) -> None:
        mine = {name: [] for name in calls}
        cycles = 0
        while not stop.is_set():
            started = time.perf_counter()
            client.send_message(QueueUrl=url, MessageBody="x" * 100)
            sent = time.perf_counter()
            got = client.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
            received = time.perf_counter()
            for message in got:
                client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            deleted = time.perf_counter()
            mine["send"].append(sent - started)
            mine["receive"].append(received - sent)
            if got:
                mine["delete"].append((deleted - received) / len(got))
            cycles += len(got)
        with lock:
            for name, values in mine.items():
                calls[name].extend(values)
            done.append(cycles)

    during_window([functools.partial(loop, client) for client in clients], seconds, stop)
    return {
        **{f"{name}_p50_ms": statistics.median(v) * 1000 for name, v in calls.items() if v},
        "messages_per_s": sum(done) / seconds,
    }

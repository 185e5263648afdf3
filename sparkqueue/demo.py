"""The guided tour behind `jobs/demo.py`: every standard-queue operation once, on a local root."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from .broker import Broker


def run_demo(spark: SparkSession, root: str, say: Callable[[str], None] = print) -> None:
    """Creates a queue and its dead-letter queue, then sends, receives, times out, extends, deletes."""
    broker = Broker(spark, root)
    for name in ("orders", "orders-dlq"):
        if name in broker.list_queues():
            broker.delete_queue(name)
    broker.create_queue("orders-dlq")
    orders = broker.create_queue("orders", dead_letter_queue="orders-dlq", max_receive_count=3)
    say(f"queues under {broker.root}: {broker.list_queues()}")
    say(
        f"per-message operations run on the {broker.engine} engine; DataFrames and the redrive"
        " pass on Spark"
    )

    first = orders.send("order #1", attributes={"customer": "ada"})
    orders.send_batch(["order #2", "order #3", {"body": "order #4", "delay_seconds": 1}])
    say(f"sent 4 messages (first id {first}); {orders.stats()}")

    received = orders.receive(10, wait_time_seconds=5)
    while len(received) < 4:  # order #4 shows up once its 1 s delay is over
        received += orders.receive(10, wait_time_seconds=5)
    say(f"received {sorted(m.body for m in received)}; {orders.stats()}")
    done, slow, flaky, *rest = received
    orders.delete(done.receipt_handle)
    say(f"deleted {done.body!r}")
    orders.change_visibility(slow.receipt_handle, 120)
    say(f"extended {slow.body!r} to 120 s: it stays hidden")
    orders.change_visibility(flaky.receipt_handle, 1)
    say(f"shortened {flaky.body!r} to 1 s: as if its consumer had crashed")
    for message in rest:
        orders.change_visibility(message.receipt_handle, 0)
        say(f"released {message.body!r} at once (visibility 0)")

    time.sleep(1.5)  # the demo runs on the wall clock; tests use FakeClock instead
    again = orders.receive(10, wait_time_seconds=5)
    say(
        "back after their timeouts: "
        + ", ".join(f"{m.body!r} (receive #{m.receive_count})" for m in again)
    )
    result = orders.delete_batch([m.receipt_handle for m in again])
    say(f"deleted {len(result.successful)} in one batch; {orders.stats()}")

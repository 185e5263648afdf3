"""FIFO under load: consumers alone, then beside a producer sending continuously.

For each scenario it reports consumer throughput, commit-conflict retries, duplicate deliveries
and order violations within groups.

Usage: python benchmarks/fifo.py [--seconds 90] [--consumers 2] [--groups 20]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections import Counter

from sparkqueue import Broker, spark_session


def run(broker: Broker, name: str, args: argparse.Namespace, with_producer: bool) -> dict:
    queue = broker.create_queue(name, fifo=True)
    backlog = [
        {"body": f"{g}:{i}", "group_id": f"g{g}", "deduplication_id": f"{g}:{i}"}
        for g in range(args.groups)
        for i in range(args.backlog)
    ]
    queue.send_batch(backlog)
    stop = threading.Event()
    delivered: list = []
    lock = threading.Lock()
    conflicts_before = broker.conflict_retries

    def consume() -> None:
        while not stop.is_set():
            batch = queue.receive(10, visibility_timeout=600)
            if batch:
                queue.delete_batch([m.receipt_handle for m in batch])
                with lock:
                    delivered.extend(batch)

    def produce() -> None:
        n = 0
        while not stop.is_set():
            entries = [
                {"body": f"{g}:p{n}", "group_id": f"g{g}", "deduplication_id": f"{g}:p{n}"}
                for g in range(0, args.groups, 4)
            ]
            queue.send_batch(entries)
            n += 1

    threads = [threading.Thread(target=consume) for _ in range(args.consumers)]
    if with_producer:
        threads.append(threading.Thread(target=produce))
    started = time.monotonic()
    for thread in threads:
        thread.start()
    stop.wait(args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    per_group: dict[str, list[int]] = {}
    for message in delivered:
        per_group.setdefault(message.group_id, []).append(message.sequence_number)
    return {
        "scenario": f"{args.consumers} consumers" + (" + 1 producer" if with_producer else ""),
        "delivered": len(delivered),
        "per_second": len(delivered) / elapsed,
        "conflict_retries": broker.conflict_retries - conflicts_before,
        "duplicates": sum(n - 1 for n in Counter(m.message_id for m in delivered).values()),
        "out_of_order": sum(seq != sorted(seq) for seq in per_group.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--backlog", type=int, default=50, help="messages per group at the start")
    args = parser.parse_args()
    broker = Broker(spark_session(), tempfile.mkdtemp(prefix="sparkqueue-fifo-bench-"))
    results = [run(broker, "alone.fifo", args, False), run(broker, "beside.fifo", args, True)]
    print("| scenario | delivered | messages/s | conflict retries | duplicates | out of order |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['scenario']} | {r['delivered']} | {r['per_second']:.2f} |"
            f" {r['conflict_retries']} | {r['duplicates']} | {r['out_of_order']} |"
        )
    ratio = results[1]["per_second"] / results[0]["per_second"] if results[0]["per_second"] else 0
    print(f"consumer throughput beside a producer: {ratio:.0%} of alone")


if __name__ == "__main__":
    main()

"""Where a native operation's time goes: a receive(1) and a delete, phase by phase.

    .venv/bin/python benchmarks/native_phases.py --rounds 200

On a standard queue of `--backlog` messages under a fresh local root, times `--rounds` receive(1)
+ delete pairs through the public API, and the same steps by hand on the native engine's pieces:
opening the table (reading its log), the candidate query, the claim UPDATE, the DELETE. Prints
the median of each (ms). No Spark is started.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.engine.claim import COLLECTED, still_claimable
from sparkqueue.engine.conditions import claimable
from sparkqueue.rules.expr import col


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--backlog", type=int, default=1000)
    args = parser.parse_args()
    broker = Broker(None, tempfile.mkdtemp(prefix="sparkqueue-phases-"))
    queue = broker.create_queue("phases")
    for start in range(0, args.backlog, 500):
        queue.send_batch([f"m{i}" for i in range(start, min(start + 500, args.backlog))])
    tables = broker.context.tables
    record = broker.context.record("phases")
    location, folder = record.location, record.location.removeprefix("file:")
    phases: dict[str, list[float]] = {}

    def timed(name: str, action):
        started = time.perf_counter()
        result = action()
        phases.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return result

    for _ in range(args.rounds):
        [message] = timed(
            "receive(1), public API", lambda: queue.receive(1, visibility_timeout=3600)
        )
        timed("delete, public API", lambda m=message: queue.delete(m.receipt_handle))
        timed("open the table (read its log)", lambda: DeltaTable(folder))
        now = broker.context.now()
        found = timed(
            "candidate query (DataFusion)",
            lambda: tables.select(
                location,
                COLLECTED,
                claimable(now, record.attributes),  # noqa: B023 - called at once
                order_by=["message_id"],
                limit=1,
            ),
        )
        rows = col("message_id").isin([r.message_id for r in found]) & still_claimable(
            found, now, record.attributes
        )
        timed(
            "claim UPDATE (open + commit)",
            lambda rows=rows: tables.transact(
                location,
                lambda: tables.change(location, rows, {"receipt_handle": col("message_id")}),
                "claim",
            ),
        )
        gone = col("shard").isin([r.shard for r in found]) & col("message_id").isin(
            [r.message_id for r in found]
        )
        timed(
            "DELETE (open + commit)",
            lambda gone=gone: tables.transact(
                location, lambda: tables.change(location, gone), "delete"
            ),
        )
    for name, values in phases.items():
        print(
            f"{name:<34} p50 {statistics.median(values):7.1f} ms   p99 {sorted(values)[int(0.99 * len(values))]:7.1f} ms"
        )


if __name__ == "__main__":
    main()

"""The Spark half of the store-fault matrix, as a driver process of its own (its session's object
store clients point at the fault proxies): `python -m tests.integration.spark_faults PLAN`.

For each store and fault kind it makes the DataFrame operations and the redrive pass's moves on a
broker of the Spark engine (`send_df`, `receive_df`, `delete_df`, `redrive`: every commit
Spark's), each with the fault armed for the first log-version put of the table the operation
changes (the queue's; the dead-letter queue's for a move: the copy); a broker of the native
engine on the same root sets each up and checks what it left behind. It prints one JSON line per
operation: store, kind, operation, outcome ("ok", or the error's type and words), whether the
fault met its request, which engines wrote that table's commits during the operation, and
seconds taken."""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from deltalake import DeltaTable

from sparkqueue import Broker, spark_session
from sparkqueue.bench.faults import FaultSwitches, Target
from sparkqueue.services.settings import RedriveSettings, UpkeepSettings
from sparkqueue.testing import FakeClock
from tests.fault_cases import redrive_move

SLOW_SECONDS = 0.5


def _send_df(spark, broker: Broker, in_spark: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("sends")
    rows = spark.createDataFrame([("a",), ("b",), ("c",)], "body string")
    assert faulted(lambda: in_spark.get_queue("sends").send_df(rows), "sends") == 3
    assert sorted(m.body for m in queue.receive(10)) == ["a", "b", "c"]
    assert queue.receive(10) == []


def _receive_df(spark, broker: Broker, in_spark: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("claims")
    sent = set(queue.send_batch([f"m{i}" for i in range(5)]))
    claimed = faulted(lambda: in_spark.get_queue("claims").receive_df(3).collect(), "claims")
    ids = [row.message_id for row in claimed]
    assert claimed and len(set(ids)) == len(ids) and set(ids) <= sent, ids
    stats = queue.stats()
    # what the claim took, it holds alone; nothing is held under a handle it never gave out
    assert (stats.visible, stats.in_flight) == (5 - len(ids), len(ids)), stats
    assert {m.message_id for m in queue.receive(10)} == sent - set(ids)


def _delete_df(spark, broker: Broker, in_spark: Broker, faulted: Callable) -> None:
    queue = broker.create_queue("deletes")
    queue.send_batch(["x", "y", "z"])
    claimed = in_spark.get_queue("deletes").receive_df(3)  # deleted by its claim
    assert claimed.count() == 3
    done = faulted(lambda: in_spark.get_queue("deletes").delete_df(claimed), "deletes")
    assert len(done.successful) == 3 and not done.failed, done
    stats = queue.stats()
    assert (stats.visible, stats.in_flight) == (0, 0), stats


def _redrive_move(
    spark, broker: Broker, in_spark: Broker, faulted: Callable, clock: FakeClock
) -> None:
    no_upkeep = RedriveSettings(defaults=UpkeepSettings(upkeep_every_seconds=0))
    redrive_move(
        broker,
        clock,
        lambda: faulted(lambda: in_spark.redrive(["redriven"], settings=no_upkeep), "dead"),
    )


OPERATIONS = [_send_df, _receive_df, _delete_df, _redrive_move]


def _engines_since(location: str, version: int, options: dict[str, str]) -> list[str]:
    """The engine of each commit of the table after `version`."""
    return [
        "spark" if "Spark" in (info.get("engineInfo") or "") else "delta-rs"
        for info in DeltaTable(location, storage_options=options).history()
        if info["version"] > version
    ]


class _Faulted:
    """Makes a call with the fault armed for the first commit on queue `table`'s table, and
    records whether the fault met that request and which engines committed there meanwhile."""

    def __init__(self, switches: FaultSwitches, kind: str, broker: Broker, options: dict) -> None:
        self.switches, self.kind, self.broker, self.options = switches, kind, broker, options
        self.met, self.engines = False, []

    def __call__(self, call: Callable[[], Any], table: str) -> Any:
        location = self.broker.context.record(table).location
        before = DeltaTable(location, storage_options=self.options).version()
        self.switches.arm(self.kind, Target.commits_of(location), seconds=SLOW_SECONDS)
        try:
            answer = call()
        finally:
            self.met = self.switches.armed() == 0
            self.switches.disarm()
        self.engines = sorted(set(_engines_since(location, before, self.options)))
        return answer


def _run(spark, store: dict[str, Any], kind: str) -> None:
    """Each operation with fault `kind` on `store`, on a root of its own."""
    switches = FaultSwitches(store["proxy"])
    clock = FakeClock()
    root, options = store["roots"][kind], store["options"]
    broker = Broker(spark, root, storage_options=options, clock=clock, engine="native")
    in_spark = Broker(spark, root, storage_options=options, clock=clock, engine="spark")
    for operation in OPERATIONS:
        faulted = _Faulted(switches, kind, broker, options)
        line = {"store": store["name"], "kind": kind, "operation": operation.__name__[1:]}
        began = time.monotonic()
        try:
            extra = (clock,) if operation is _redrive_move else ()
            operation(spark, broker, in_spark, faulted, *extra)
            line["outcome"] = "ok"
        except Exception as error:  # the record says what the caller saw
            switches.disarm()
            said = str(error).strip().splitlines() or [""]  # a JVM's: the exception's line
            words = next((each for each in said if "Exception" in each), said[0])[:400]
            line["outcome"] = f"{type(error).__name__}: {words}"
            traceback.print_exc()
        line.update(met=faulted.met, engines=faulted.engines)
        line["seconds"] = round(time.monotonic() - began, 1)
        print(json.dumps(line), flush=True)


def main() -> None:
    """PLAN (JSON): the session's storage options and conf, the stores (name, proxy, options,
    a root per kind) and the kinds."""
    plan = json.loads(sys.argv[1])
    spark = spark_session(storage_options=plan["options"], **plan["conf"])
    for store in plan["stores"]:
        for kind in plan["kinds"]:
            _run(spark, store, kind)
    spark.stop()


if __name__ == "__main__":
    main()

"""The fairness scenario (`--only fair`): tenants of one standard queue, their messages' wait from
send to receive, with a noisy neighbour and without, with fair queues and without.

`--consumers` threads loop `receive(10)`, spend `--fair-work-ms` per message, and `delete_batch`;
what they take per second from a backlog is measured first. `--fair-tenants` quiet tenants each
send `--fair-rate` msg/s (0: a fifteenth of that capacity, so each uses a few percent of the
consumers' time, as SQS's fair queues assume); in the noisy runs one more tenant sends ten times
that. The consumers keep up with the quiet tenants, not with the noisy one, whose backlog grows.
One producer sends every tenant's messages due, ten batches a second. Each run lasts
`--fair-seconds` on a queue of its own:
- quiet alone: the quiet tenants' wait without a neighbour;
- noisy, fair: the same beside the noisy tenant, every message carrying its tenant's group;
- noisy, unfair: the same messages without groups (each message then a tenant of its own, as in
  SQS: nobody is noisy), the tenant in an attribute.
The bar: the quiet tenants' p99 wait beside the noisy one, fair, within 2x of alone; the same two
runs again through the SQS endpoint served in this process, every thread a boto3 client of it
(SendMessageBatch, ReceiveMessage, DeleteMessageBatch). Each run also reports the p99 of the
messages sent after its first SETTLED_SECONDS, once the noisy tenant has been judged: what is
left when the start, which every reactive judgement pays, is set apart. Then a single
tenant's load (the load scenario with every message in one group) beside the same load without
groups, for what counting tenants costs: two runs each, in the order A B B A, their means.

    python -m sparkqueue.bench --engine native --only fair --fair-seconds 30
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..broker import Broker
from ..queue import Queue
from .endpoint import ACCESS_KEY, SECRET_KEY, sqs_client
from .loads import load
from .timing import percentile
from .window import during_window

NOISY_TIMES = 10  # the noisy tenant's rate, in quiet tenants' rates
TICK_SECONDS = 0.1  # a producer sends one batch per tick
# A tenant is judged noisy once it has a backlog at a count (a second or less apart): the waits of
# messages sent after this many seconds of a run are its settled figures, apart from the start.
SETTLED_SECONDS = 4.0


@dataclass(frozen=True)
class Tenancy:
    """What a fair run's thread does to its queue, straight on `Queue` or over the SQS API:
    send entries (`body`, `attributes` with the tenant, `group_id` when fair), receive up to ten
    as (tenant, seconds since sent, receipt handle), delete by handles."""

    send: Callable[[list[dict[str, Any]]], object]
    receive: Callable[[], list[tuple[str, float, str]]]
    delete: Callable[[list[str]], object]


def straight(queue: Queue) -> Tenancy:
    def receive() -> list[tuple[str, float, str]]:
        messages = queue.receive(10, visibility_timeout=3_600)
        now = datetime.now(UTC)
        return [
            (m.attributes["tenant"], (now - m.sent_at).total_seconds(), m.receipt_handle)
            for m in messages
        ]

    return Tenancy(queue.send_batch, receive, queue.delete_batch)


def over_sqs(endpoint_url: str, queue_url: str) -> Tenancy:
    """A boto3 client's SendMessageBatch (ten entries a call), ReceiveMessage and
    DeleteMessageBatch on the queue, through the endpoint."""
    client = sqs_client(endpoint_url)

    def send(entries: list[dict[str, Any]]) -> None:
        for start in range(0, len(entries), 10):
            batch = [
                {"Id": str(i), "MessageBody": entry["body"],
                 "MessageAttributes": {"tenant": {"DataType": "String",
                                                  "StringValue": entry["attributes"]["tenant"]}},
                 **({"MessageGroupId": entry["group_id"]} if "group_id" in entry else {})}
                for i, entry in enumerate(entries[start : start + 10])
            ]  # fmt: skip
            client.send_message_batch(QueueUrl=queue_url, Entries=batch)

    def receive() -> list[tuple[str, float, str]]:
        got = client.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=3_600,
            MessageAttributeNames=["tenant"], MessageSystemAttributeNames=["SentTimestamp"],
        ).get("Messages", [])  # fmt: skip
        now_ms = time.time() * 1000
        return [
            (m["MessageAttributes"]["tenant"]["StringValue"],
             (now_ms - int(m["Attributes"]["SentTimestamp"])) / 1000, m["ReceiptHandle"])
            for m in got
        ]  # fmt: skip

    def delete(handles: list[str]) -> None:
        entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
        client.delete_message_batch(QueueUrl=queue_url, Entries=entries)

    return Tenancy(send, receive, delete)


def fair_run(
    broker: Broker,
    name: str,
    seconds: float,
    consumers: int,
    *,
    tenants: int,
    rate: float,
    work_ms: float,
    noisy: bool,
    fair: bool,
    client: Callable[[Queue], Tenancy] = straight,
) -> dict[str, Any]:
    """One run: each tenant's producer and the consumers for `seconds`, each thread with a
    `client` of its own; each tenant kind's waits (seconds from send to receive), p50 and p99,
    and the quiet tenants' for the messages sent after SETTLED_SECONDS (`quiet_settled`); and
    what the consumers took and the quiet tenants sent per second: the consumers' headroom."""
    queue = broker.create_queue(name, visibility_timeout=3_600)
    names = [f"quiet{i}" for i in range(tenants)] + (["noisy"] if noisy else [])
    waits: dict[str, list[tuple[float, float]]] = {tenant: [] for tenant in names}  # wait, sent
    sent = dict.fromkeys(names, 0)  # by the producer alone
    lock = threading.Lock()
    stop = threading.Event()

    def produce() -> None:  # one batch a tick of every tenant's messages due (one commit)
        calls, owed, due = client(queue), dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
        started = time.monotonic()
        while not stop.is_set():
            entries = []
            for tenant in names:
                owed[tenant] += rate * TICK_SECONDS * (NOISY_TIMES if tenant == "noisy" else 1)
                entries += [
                    {"body": f"{tenant} {i}", "attributes": {"tenant": tenant},
                     **({"group_id": tenant} if fair else {})}
                    for i in range(int(owed[tenant]))
                ]  # fmt: skip
                due[tenant] = int(owed[tenant])
                owed[tenant] -= int(owed[tenant])
            if entries:
                calls.send(entries)
                for tenant, count in due.items():
                    sent[tenant] += count
            started += TICK_SECONDS
            stop.wait(max(0.0, started - time.monotonic()))

    def consume() -> None:
        calls = client(queue)
        while not stop.is_set():
            messages = calls.receive()
            at = time.monotonic() - opened
            with lock:
                for tenant, waited, _ in messages:
                    waits[tenant].append((waited, at - waited))
            if not messages:
                stop.wait(0.05)
                continue
            stop.wait(work_ms * len(messages) / 1000)  # the work each message costs
            calls.delete([handle for *_, handle in messages])

    opened = time.monotonic()
    during_window([consume] * consumers + [produce], seconds, stop)
    elapsed = time.monotonic() - opened
    quiet = [wait for tenant in names if tenant != "noisy" for wait in waits[tenant]]
    figures = {
        "quiet": _waits([wait for wait, _ in quiet]),
        "quiet_settled": _waits([wait for wait, at in quiet if at >= SETTLED_SECONDS]),
        "taken_per_s": sum(len(waits[tenant]) for tenant in names) / elapsed,
        "quiet_sent_per_s": sum(sent[tenant] for tenant in names if tenant != "noisy") / elapsed,
    }
    if noisy:
        figures["noisy"] = _waits([wait for wait, _ in waits["noisy"]])
    figures["backlog_left"] = queue.stats().visible
    return figures


def _settled_ratio(beside: dict[str, Any], alone: dict[str, Any]) -> float | None:
    """The quiet tenants' settled p99 beside the noisy one against alone; None when either run
    received no message sent that late (a run of SETTLED_SECONDS or less)."""
    late, base = beside["quiet_settled"], alone["quiet_settled"]
    if not late["received"] or not base["received"]:
        return None
    return late["p99_s"] / max(base["p99_s"], 1e-9)


def _waits(values: list[float]) -> dict[str, float]:
    if not values:
        return {"received": 0, "p50_s": 0.0, "p99_s": 0.0}
    return {
        "received": len(values),
        "p50_s": percentile(values, 0.5),
        "p99_s": percentile(values, 0.99),
    }


def capacity(
    broker: Broker,
    seconds: float,
    consumers: int,
    work_ms: float,
    *,
    name: str = "fair-capacity",
    client: Callable[[Queue], Tenancy] = straight,
) -> float:
    """What the consumers (each with a `client` of its own) take per second, each message
    costing `work_ms`, from a backlog."""
    queue = broker.create_queue(name, visibility_timeout=3_600)
    backlog = int(seconds * consumers * 1000 / work_ms)
    queue.send_batch(
        [{"body": f"backlog {i}", "attributes": {"tenant": "-"}} for i in range(backlog)]
    )
    taken: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        calls = client(queue)
        while not stop.is_set():
            messages = calls.receive()
            stop.wait(work_ms * len(messages) / 1000)
            if messages:
                calls.delete([handle for *_, handle in messages])
                taken.append(len(messages))

    during_window([consume] * consumers, seconds, stop)
    return sum(taken) / seconds


def fair(
    broker: Broker,
    seconds: float,
    consumers: int,
    tenants: int,
    rate: float,
    work_ms: float,
    load_seconds: float,
) -> dict[str, Any]:
    """The three runs, then a single tenant's load beside the same load without groups (the
    mean of two runs each). With
    `rate` 0, each quiet tenant sends a fifteenth of what the consumers take (measured first):
    each a few percent of their time, the noisy one ten times that, more than they take."""
    taken = capacity(broker, min(seconds, 10.0), consumers, work_ms)
    rate = rate or taken / 15

    def run(name: str, noisy: bool, fair: bool) -> dict[str, Any]:
        return fair_run(broker, name, seconds, consumers, tenants=tenants, rate=rate,
                        work_ms=work_ms, noisy=noisy, fair=fair)  # fmt: skip

    alone = run("fair-alone", noisy=False, fair=True)
    with_fairness = run("fair-noisy", noisy=True, fair=True)
    without = run("fair-noisy-unfair", noisy=True, fair=False)
    base = max(alone["quiet"]["p99_s"], 1e-9)
    over = over_endpoint(broker, seconds, consumers, tenants, work_ms)
    # One tenant against no groups, in the order A B B A: the machine's drift over the four
    # runs (and whatever the fair runs before them left behind) falls on both alike.
    order = ("solo", None, None, "solo")
    loads = [
        load(broker, load_seconds, consumers, name=f"fair-load-{i}", tenant=tenant)
        for i, tenant in enumerate(order)
    ]
    solo = [result for result, tenant in zip(loads, order, strict=True) if tenant]
    ungrouped = [result for result, tenant in zip(loads, order, strict=True) if not tenant]
    return {
        "capacity_per_s": taken,
        "quiet_rate": rate,
        "quiet_alone": alone,
        "noisy_fair": with_fairness,
        "noisy_unfair": without,
        "quiet_p99_ratio_fair": with_fairness["quiet"]["p99_s"] / base,
        "quiet_p99_ratio_unfair": without["quiet"]["p99_s"] / base,
        "settled_s": SETTLED_SECONDS,
        "quiet_settled_p99_ratio_fair": _settled_ratio(with_fairness, alone),
        "single_tenant_per_s": statistics.fmean(r["per_s"] for r in solo),
        "ungrouped_per_s": statistics.fmean(r["per_s"] for r in ungrouped),
        "single_tenant_ran_dry": any(r["ran_dry"] for r in solo),
        **over,
    }


def over_endpoint(
    broker: Broker, seconds: float, consumers: int, tenants: int, work_ms: float
) -> dict[str, Any]:
    """The quiet tenants alone and beside the noisy one, fair, with every thread a boto3 client
    of the SQS endpoint served in this process: the rates from what the consumers take through
    it (each call a request, fewer than straight on `Queue`), measured first."""
    from ..endpoint import AccessKeys, SqsEndpoint

    keys = AccessKeys.parse(f"{ACCESS_KEY}:{SECRET_KEY}")
    with SqsEndpoint(broker, port=0, access_keys=keys, redrive_every=0) as served:

        def client(queue: Queue) -> Tenancy:
            account = served.service.naming.account
            return over_sqs(served.url, f"{served.url}/{account}/{queue.name}")

        taken = capacity(broker, min(seconds, 10.0), consumers, work_ms,
                         name="fair-capacity-sqs", client=client)  # fmt: skip

        def run(name: str, noisy: bool) -> dict[str, Any]:
            return fair_run(broker, name, seconds, consumers, tenants=tenants, rate=taken / 15,
                            work_ms=work_ms, noisy=noisy, fair=True, client=client)  # fmt: skip

        alone, beside = run("fair-alone-sqs", noisy=False), run("fair-noisy-sqs", noisy=True)
    base = max(alone["quiet"]["p99_s"], 1e-9)
    return {
        "endpoint_capacity_per_s": taken,
        "endpoint_quiet_alone": alone,
        "endpoint_noisy_fair": beside,
        "endpoint_quiet_p99_ratio_fair": beside["quiet"]["p99_s"] / base,
        "endpoint_quiet_settled_p99_ratio_fair": _settled_ratio(beside, alone),
    }

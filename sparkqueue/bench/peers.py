"""The peers scenario (`--only peers`, not in the default run): the queues a user would pick
instead, measured where installed with our scenarios' workload shapes, so that their rows stand
beside ours in one report.

    python -m sparkqueue.bench --only peers --pgmq-dsn postgresql://user@127.0.0.1:5432/db \\
        --endpoint-seconds 30 --worker-seconds 30 --worker-batches 10,100,1000

- moto's SQS server (moto, from the dev extra), served in this process as the endpoint scenario
  serves ours: 1 and 8 boto3 clients looping send, receive, delete for `--endpoint-seconds`
  (the endpoint scenario's loop and figures).
- PGMQ on PostgreSQL, given `--pgmq-dsn` (or SPARKQUEUE_BENCH_PGMQ_DSN) of a database where PGMQ
  is installed (as an extension, or from its plain SQL) and psycopg (the `bench` extra): the
  worker-loop scenario's grid (`--worker-batches` with 1 and 4 workers, `--worker-seconds` each,
  a backlog topped up to `--worker-backlog`), each worker a connection of its own looping
  `pgmq.read(queue, vt, batch)` + `pgmq.delete(queue, msg_ids)`; and the rate of the top-ups'
  `pgmq.send_batch` of SEND_BATCH messages.

A peer that is not there gets a row saying why; the run goes on. The figures are the same
machine's, in the same run as ours when named together (`--only worker --only endpoint --only
peers`): PostgreSQL runs beside the benchmark, sharing its cores, as Delta's files do."""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from .backlog import BODY_BYTES
from .endpoint import CLIENTS, cycles, over_http, sqs_client
from .timing import timed
from .window import during_window
from .worker import grid

DSN_VARIABLE = "SPARKQUEUE_BENCH_PGMQ_DSN"
SEND_BATCH = 1_000  # messages per pgmq.send_batch while topping the backlog up
VISIBILITY_SECONDS = 600  # as the worker scenario's queue


def peers(
    pgmq_dsn: str | None,
    endpoint_seconds: float,
    batches: Sequence[int],
    backlog: int,
    worker_seconds: float,
) -> dict[str, Any]:
    """Each peer's figures, or {"missing": why} for one that is not installed."""
    return {
        "moto": moto_sqs(endpoint_seconds),
        "pgmq": pgmq(pgmq_dsn, batches, backlog, worker_seconds),
    }


def moto_sqs(seconds: float) -> dict[str, Any]:
    """The endpoint scenario's boto3 loop against moto's SQS server, with 1 and 8 clients."""
    absent = [name for name in ("boto3", "moto") if importlib.util.find_spec(name) is None]
    if absent:
        return {"missing": f"not installed ({', '.join(absent)}: the dev extra)"}
    from moto.server import ThreadedMotoServer

    # Its server logs every request (werkzeug's access log): noise, and time taken from it.
    access_log = logging.getLogger("werkzeug")
    level = access_log.level
    access_log.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint_url = f"http://{host}:{port}"
        results: dict[str, Any] = {}
        for count in CLIENTS:
            name = f"peers-{count}-{uuid.uuid4().hex[:8]}"  # moto's queues live in this process
            queue_url = sqs_client(endpoint_url).create_queue(QueueName=name)["QueueUrl"]
            clients = [over_http(queue_url, endpoint_url) for _ in range(count)]
            results[f"http_{count}"] = cycles(clients, seconds)
        return results
    finally:
        server.stop()
        access_log.setLevel(level)


def pgmq(dsn: str | None, batches: Sequence[int], backlog: int, seconds: float) -> dict[str, Any]:
    """PGMQ's worker loop through the worker scenario's grid, on a queue of its own that is
    dropped afterwards; and the send rate of the backlog's top-ups."""
    if not dsn:
        return {"missing": f"not installed (give --pgmq-dsn or {DSN_VARIABLE})"}
    try:
        import psycopg
    except ImportError:
        return {"missing": "not installed (psycopg: pip install 'sparkqueue[bench]')"}
    queue = f"sparkqueue_bench_{uuid.uuid4().hex[:8]}"
    sends: list[tuple[int, float]] = []  # each top-up's messages and seconds
    try:
        admin_connection = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as error:  # no server there: the run goes on without it
        return {"missing": f"not reachable ({type(error).__name__})"}
    with admin_connection as admin:
        installed = "select exists (select from pg_namespace where nspname = 'pgmq')"
        if admin.execute(installed).fetchone() != (True,):
            return {"missing": "not installed (no pgmq schema in that database)"}
        admin.execute("select pgmq.create(%s)", (queue,))
        try:

            def top_up(count: int) -> None:
                sends.append((count, timed(lambda: _send(admin, queue, count))[0]))

            cells = grid(batches, backlog, top_up, lambda b, w: _workers(dsn, queue, b, w, seconds))
        finally:
            admin.execute("select pgmq.drop_queue(%s)", (queue,))
    sent = sum(count for count, _ in sends)
    return {
        "send_batch": SEND_BATCH,
        "sent": sent,
        "send_per_s": sent / sum(took for _, took in sends),
        "worker": cells,
    }


def _send(connection: Any, queue: str, count: int) -> None:
    """`count` bodies of BODY_BYTES characters (JSON strings), SEND_BATCH per `send_batch`."""
    for start in range(0, count, SEND_BATCH):
        ends = min(start + SEND_BATCH, count)
        bodies = [json.dumps(str(i).rjust(BODY_BYTES, "x")) for i in range(start, ends)]
        connection.execute("select count(*) from pgmq.send_batch(%s, %s::jsonb[])", (queue, bodies))


def _workers(dsn: str, queue: str, batch: int, workers: int, seconds: float) -> int:
    """`workers` threads, each on a connection of its own, read `batch` messages (their bodies
    too, as a handler would) and delete them by id, for `seconds`: how many they deleted."""
    import psycopg

    deleted: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def loop() -> None:
        done = 0
        try:
            with psycopg.connect(dsn, autocommit=True) as connection:
                while not stop.is_set():
                    rows = connection.execute(
                        "select msg_id, message from pgmq.read(%s, %s, %s)",
                        (queue, VISIBILITY_SECONDS, batch),
                    ).fetchall()
                    if rows:
                        ids = [row[0] for row in rows]
                        done += len(
                            connection.execute(
                                "select * from pgmq.delete(%s, %s::bigint[])", (queue, ids)
                            ).fetchall()
                        )
        except BaseException as error:  # the run fails, not this thread alone
            errors.append(error)
            stop.set()
        deleted.append(done)

    during_window([loop] * workers, seconds, stop)
    if errors:
        raise errors[0]
    return sum(deleted)

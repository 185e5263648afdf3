"""Helpers shared by test modules."""

from __future__ import annotations

import threading


def run_threads(targets) -> None:
    """Runs each target in its own thread; fails if any of them raised."""
    errors: list[BaseException] = []

    def guarded(target):
        try:
            target()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def queue_table(queue):
    """The Delta table behind a queue, as the engine reads it (FIFO: with sequence numbers)."""
    context = queue._ctx
    return context.read(context.record(queue.name))


def rows_table(folder, rows: list[dict]) -> str:
    """A Delta table of whole message rows, written by delta-rs, at `folder`/t."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from sparkqueue.store.native_arrow import arrow_schema
    from sparkqueue.store.schema import MESSAGE_COLUMNS

    path = str(folder / "t")
    write_deltalake(path, pa.Table.from_pylist(rows, arrow_schema(MESSAGE_COLUMNS)))
    return path


def engines_through_kills(root: str, folder, storage_options: dict[str, str], seed: int):
    """The chaos run's roles on an object-storage root both engines share (native consumer
    processes, a Spark job of DataFrames and redrive passes, SIGKILLed at random): checks that
    nothing was lost, sent unrecorded, handed out twice or too soon, and that both kinds worked.
    Returns the report for the store's own checks."""
    from sparkqueue.bench.chaos import run_chaos

    report = run_chaos(
        None,
        root,
        folder,
        seconds=25,
        consumers=2,
        messages=100,
        kill_every=(3.0, 6.0),
        seed=seed,
        min_kills=4,
        spark_work=True,
        storage_options=storage_options,
    )
    assert report.kills >= 4, report
    assert report.lost == [] and report.unsent == [] and report.too_soon == [], report
    assert report.doubled == [] and report.dead_undelivered == (), report
    assert report.failed == 0, report  # no fault but the kills: no role's step raised
    assert report.deleted + report.left == report.sent
    assert report.by_job > 0, report  # the Spark job sent and claimed
    assert report.sent > 100  # and the native producer sent its 100
    return report

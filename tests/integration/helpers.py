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

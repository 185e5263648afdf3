"""Message move tasks (StartMessageMoveTask and friends): a dead-letter queue's messages moved
back in the background, in chunks, so a task reports progress and can be cancelled between them.

Tasks live in the server process, as SQS keeps them for its own lifetime of 14 days: a restarted
endpoint lists none. Each chunk is `Queue.start_message_move`, crash-safe on its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from ..queue import Queue
from .faults import SqsFault

CHUNK = 1000  # messages per move when no rate is asked for
LISTED_BY_DEFAULT = 1
MAX_LISTED = 10


@dataclass
class MoveTask:
    handle: str
    source: str
    destination: str | None
    rate: int | None
    to_move: int
    started_ms: int
    status: str = "RUNNING"
    moved: int = 0
    failure: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)


class MoveTasks:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: list[MoveTask] = []
        self._threads: list[threading.Thread] = []
        self._closed = False

    def start(
        self,
        source: Queue,
        destination: str | None,
        rate: int | None,
    ) -> MoveTask:
        """Starts moving `source`'s messages on a thread of the task's own (through the broker
        that serves `source`: Service.find)."""
        to_move = source.stats().visible  # storage I/O: not under the lock `close` takes
        with self._lock:
            if self._closed:
                raise SqsFault("ServiceUnavailable", "the endpoint is shutting down")
            if any(t.source == source.name and t.status == "RUNNING" for t in self._tasks):
                raise SqsFault(
                    "UnsupportedOperation", f"a move task from {source.name!r} is running already"
                )
            task = MoveTask(
                handle=uuid.uuid4().hex,
                source=source.name,
                destination=destination,
                rate=rate,
                to_move=to_move,
                started_ms=int(time.time() * 1000),
            )
            thread = threading.Thread(target=self._run, args=(task, source), daemon=True)
            try:
                thread.start()  # under the lock: `close` joins only threads that started
            except RuntimeError:  # no thread to be had: no task either
                raise SqsFault("ServiceUnavailable", "no thread is free to move messages") from None
            self._tasks.append(task)
            self._threads = [each for each in self._threads if each.is_alive()] + [thread]
        return task

    def close(self, seconds: float) -> None:
        """Cancels the running tasks and waits up to `seconds` for their chunks under way (each
        crash-safe; the endpoint closes, and its process may end: see draining.py)."""
        deadline = time.monotonic() + seconds
        with self._lock:
            self._closed = True  # and no task starts after
            for task in self._tasks:
                task.stop.set()
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def listed(self, source: str, max_results: int | None) -> list[MoveTask]:
        """The source's tasks, newest first."""
        limit = LISTED_BY_DEFAULT if max_results is None else max_results
        if not 1 <= limit <= MAX_LISTED:
            raise SqsFault("InvalidParameterValue", f"MaxResults must be from 1 to {MAX_LISTED}")
        with self._lock:
            return [t for t in reversed(self._tasks) if t.source == source][:limit]

    def cancel(self, handle: str) -> MoveTask:
        with self._lock:
            task = next((t for t in self._tasks if t.handle == handle), None)
        if task is None or task.status != "RUNNING":
            raise SqsFault("ResourceNotFoundException", "no running move task has this handle")
        task.stop.set()
        return task

    def _run(self, task: MoveTask, source: Queue) -> None:
        chunk = task.rate or CHUNK
        try:
            while not task.stop.is_set():
                started = time.monotonic()
                moved = source.start_message_move(task.destination, max_messages=chunk)
                task.moved += moved
                if moved == 0 or task.moved >= task.to_move:
                    break
                if task.rate is not None:  # a chunk of `rate` messages per second at most
                    task.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))
            task.status = "CANCELLED" if task.stop.is_set() else "COMPLETED"
        except Exception as error:  # reported by ListMessageMoveTasks, as SQS does
            task.failure = str(error)  # redacted, then cut to size, when listed
            task.status = "FAILED"

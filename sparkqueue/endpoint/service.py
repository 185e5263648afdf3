"""What every action needs: the broker, the names it plays, long polls and move tasks, the
queue a request is about (from its QueueUrl, or the path the query protocol posted to), and how
sparkqueue's errors become SQS errors without saying where the server keeps its tables."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..broker import Broker
from ..errors import (
    InvalidParameterValue,
    QueueDoesNotExist,
    QueueError,
    ReceiptHandleIsInvalid,
    UnsupportedOperation,
)
from ..limits import PURGE_EVERY_SECONDS, QUEUE_LOOKUP_CACHE_SECONDS
from ..queue import Queue
from ..rules import handles
from .faults import NO_QUEUE, SqsFault, fault_of, missing_parameter
from .longpoll import LongPolls
from .lookup import Lookups
from .naming import Naming
from .tasks import MoveTasks

STORAGE = "<storage>"  # what error texts say instead of the server's root or table locations
WEB_URL = re.compile(r"https?://[^\s'\"]+")


@dataclass
class Service:
    """What the actions share: the broker, naming, long polls and move tasks.

    A broker without Spark (the native engine alone) serves every queue it created and moves
    messages itself; what needs Spark (FIFO queues whose tables Spark numbers, and the redrive
    passes, where Spark can serve those queues too) goes to `spark_broker()`, a broker on the
    same root with a Spark session that `open_spark` starts on first need, off the request path
    of every other call."""

    broker: Broker
    naming: Naming = field(default_factory=Naming)
    polls: LongPolls = field(default_factory=LongPolls)
    tasks: MoveTasks = field(default_factory=MoveTasks)
    open_spark: Callable[[], Broker] | None = None
    queues: Lookups[Queue] = field(init=False)
    # Each queue table's PurgeQueue under way, and its last one within the minute, through this
    # service (SQS allows one a minute).
    _purging: set[str] = field(init=False, default_factory=set)
    _purged: dict[str, datetime] = field(init=False, default_factory=dict)
    _purge_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _spark: Broker | None = field(init=False, default=None)
    _spark_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.queues = Lookups(self._get_queue, QUEUE_LOOKUP_CACHE_SECONDS)
        if self.broker.spark is not None:
            self._spark = self.broker

    def spark_broker(self) -> Broker:
        """The broker with Spark, started the first time something needs it."""
        with self._spark_lock:
            if self._spark is None:
                if self.open_spark is None:
                    raise UnsupportedOperation("this needs Spark, and the endpoint has no session")
                try:
                    self._spark = self.open_spark()
                except ImportError as error:
                    raise UnsupportedOperation(
                        f"this needs Spark, which is not installed here ({error}): install"
                        " sparkqueue[local] beside the endpoint"
                    ) from None
            return self._spark

    def pass_broker(self) -> Broker:
        """The broker that runs the redrive passes: Spark's where this endpoint can open a
        session, else its own through the native engine (object storage, where Spark stays out
        of the process, or no pyspark installed: such passes skip FIFO queues whose tables Spark
        numbers)."""
        try:
            return self.spark_broker()
        except UnsupportedOperation:
            if self.broker.context.native is None:
                raise
            return self.broker

    def moves_at_receive(self, name: str) -> bool:
        """Whether receives on `name` move messages that used up their receives to its
        dead-letter queue themselves, as SQS does: where the native engine serves the queue (a
        move costs milliseconds there); otherwise the redrive passes move them."""
        context = self.broker.context
        record = context.registry.get(name)
        return (
            self.broker.engine == "native" and record is not None and not context.spark_only(record)
        )

    def find(self, name: str) -> Queue | None:
        """The queue `name`, or None when there is none (or no queue could have that name)."""
        return self.queues.get(name)

    def _get_queue(self, name: str) -> Queue | None:
        try:
            if self.broker.spark is None:  # the queue's table says which engine opens it
                record = self.broker.context.registry.get(name)
                if record is not None and self.broker.context.spark_only(record):
                    return self.spark_broker().get_queue(name)
            return self.broker.get_queue(name)
        except (QueueDoesNotExist, InvalidParameterValue):
            return None

    def sources_of(self, dead_letter_queue: str, *, fresh: bool = True) -> list[str]:
        """The queues whose redrive policy names `dead_letter_queue`, from the registry alone
        (opening each queue would start Spark for a FIFO queue whose table Spark numbers); read
        afresh, or (`fresh=False`) as the broker's registry cache holds it."""
        records = self.broker.context.registry.records(fresh=fresh)
        return sorted(
            name
            for name, record in records.items()
            if record.attributes.dead_letter_queue == dead_letter_queue
        )

    @contextmanager
    def purging(self, queue: Queue) -> Iterator[None]:
        """Around a PurgeQueue: PurgeQueueInProgress, as SQS answers, while this service purges
        the queue's table or within PURGE_EVERY_SECONDS of its last purge there; a purge that
        fails counts as none."""
        location = self.broker.context.record(queue.name).location
        now = self.broker.context.now()
        window = timedelta(seconds=PURGE_EVERY_SECONDS)
        with self._purge_lock:
            last = self._purged.get(location)
            if location in self._purging or (last is not None and now - last < window):
                raise SqsFault(
                    "PurgeQueueInProgress",
                    f"Only one PurgeQueue operation on {queue.name} is allowed every"
                    f" {PURGE_EVERY_SECONDS} seconds.",
                )
            self._purging.add(location)
        done = False
        try:
            yield
            done = True
        finally:
            with self._purge_lock:
                self._purging.discard(location)
                if done:  # the minute runs from the request; older ones are forgotten
                    self._purged = {k: t for k, t in self._purged.items() if now - t < window}
                    self._purged[location] = now

    def authentic(self, queue: Queue, handle: str) -> bool:
        """Whether `handle` is one this queue issued (current or not): SQS lets an old handle's
        delete succeed, but never a malformed or forged one's."""
        try:
            handles.parse(self.broker.context.record(queue.name).secret, handle)
        except (ReceiptHandleIsInvalid, QueueDoesNotExist):
            return False
        return True

    def private(self, fault: SqsFault) -> SqsFault:
        """The fault with the server's root and table locations taken out of its text."""
        message = self._without_storage(fault.message)
        return fault if message == fault.message else SqsFault(fault.kind.name, message)

    def redacted(self, text: str) -> str:
        """An error of the storage itself (a move task's failure) for clients: the server's
        root and table locations taken out, and any http(s) URL (an object store's request,
        naming its bucket and keys, maybe signed)."""
        return WEB_URL.sub(STORAGE, self._without_storage(text))

    def _without_storage(self, text: str) -> str:
        layout = self.broker.context.tables.layout
        for secret in sorted({str(layout), layout.local_dir or ""} - {""}, key=len, reverse=True):
            text = text.replace(secret, STORAGE)
        return text


def action(run: Callable[[Request], dict[str, Any]]) -> Callable[[Request], dict[str, Any]]:
    """An SQS action: sparkqueue errors become SQS ones, and no error text discloses where the
    server keeps its tables. A queue found missing is looked up afresh next time."""

    @functools.wraps(run)
    def answer(request: Request) -> dict[str, Any]:
        try:
            return run(request)
        except SqsFault as fault:
            raise request.service.private(fault) from None
        except QueueError as error:
            if isinstance(error, QueueDoesNotExist):
                request.service.queues.forget()
            raise request.service.private(fault_of(error)) from None

    return answer


@dataclass(frozen=True)
class Request:
    """One call's parameters, with where the client reached us (for the URLs we hand out),
    whether it still waits for the answer, and what to undo when the answer cannot reach it."""

    service: Service
    params: dict[str, Any]
    origin: str  # "http://host:port" as the client addressed it
    path: str
    connected: Callable[[], bool] = lambda: True
    # Called when the answer could not be delivered: a receive gives its messages back.
    undelivered: list[Callable[[], None]] = field(default_factory=list)

    def required(self, name: str) -> Any:
        value = self.params.get(name)
        if value is None:
            raise SqsFault("MissingParameter", missing_parameter(name))
        return value

    def queue_name(self) -> str:
        url = self.params.get("QueueUrl")
        if url is None and self.path.strip("/"):
            url = self.path  # the query protocol may post to the queue's URL instead
        if url is None:
            raise SqsFault("MissingParameter", missing_parameter("QueueUrl"))
        return self.service.naming.name_of_url(url)

    def queue(self) -> Queue:
        name = self.queue_name()
        queue = self.service.find(name)  # a name no queue can have names no queue, as in SQS
        if queue is None:
            raise SqsFault("QueueDoesNotExist", NO_QUEUE)
        return queue

    def url(self, name: str) -> str:
        return self.service.naming.url(self.origin, name)

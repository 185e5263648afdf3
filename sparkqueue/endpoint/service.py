"""What every action needs: the broker, the names it plays, long polls and move tasks, and the
queue a request is about (from its QueueUrl, or the path the query protocol posted to)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..broker import Broker
from ..errors import InvalidParameterValue, QueueDoesNotExist
from ..queue import Queue
from .faults import SqsFault
from .longpoll import LongPolls
from .naming import Naming
from .tasks import MoveTasks


@dataclass
class Service:
    broker: Broker
    naming: Naming = field(default_factory=Naming)
    polls: LongPolls = field(default_factory=LongPolls)
    tasks: MoveTasks = field(default_factory=MoveTasks)

    def find(self, name: str) -> Queue | None:
        """The queue `name`, or None when there is none (or no queue could have that name)."""
        try:
            return self.broker.get_queue(name)
        except (QueueDoesNotExist, InvalidParameterValue):
            return None

    def sources_of(self, dead_letter_queue: str) -> list[str]:
        """The queues whose redrive policy names `dead_letter_queue`."""
        return [
            name
            for name in self.broker.list_queues()
            if self.broker.get_queue(name).attributes["dead_letter_queue"] == dead_letter_queue
        ]


@dataclass(frozen=True)
class Request:
    """One call's parameters, with where the client reached us (for the URLs we hand out)."""

    service: Service
    params: dict[str, Any]
    origin: str  # "http://host:port" as the client addressed it
    path: str

    def required(self, name: str) -> Any:
        value = self.params.get(name)
        if value is None:
            raise SqsFault("MissingParameter", f"the request must give {name}")
        return value

    def queue_name(self) -> str:
        url = self.params.get("QueueUrl")
        if url is None and self.path.strip("/"):
            url = self.path  # the query protocol may post to the queue's URL instead
        if url is None:
            raise SqsFault("MissingParameter", "the request must give QueueUrl")
        return self.service.naming.name_of_url(url)

    def queue(self) -> Queue:
        name = self.queue_name()
        queue = self.service.find(name)  # a name no queue can have names no queue, as in SQS
        if queue is None:
            raise SqsFault("QueueDoesNotExist", f"there is no queue {name[:80]!r}")
        return queue

    def url(self, name: str) -> str:
        return self.service.naming.url(self.origin, name)

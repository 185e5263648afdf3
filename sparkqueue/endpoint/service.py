"""What every action needs: the broker, the names it plays, long polls and move tasks, and the
queue a request is about (from its QueueUrl, or the path the query protocol posted to)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..broker import Broker
from ..errors import InvalidParameterValue
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
        try:
            return self.service.broker.get_queue(name)
        except InvalidParameterValue:  # a name no queue can have names no queue, as in SQS
            raise SqsFault("QueueDoesNotExist", f"there is no queue {name[:80]!r}") from None

    def url(self, name: str) -> str:
        return self.service.naming.url(self.origin, name)

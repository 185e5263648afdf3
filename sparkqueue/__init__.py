"""sparkqueue: a distributed queue with Amazon SQS semantics whose messages live in Delta tables."""

from . import errors
from .broker import Broker
from .message import BatchResult, Message, QueueStats
from .queue import Queue
from .redrive import RedriveReport
from .session import spark_session
from .worker import ConsumeReport

__all__ = [
    "BatchResult",
    "Broker",
    "ConsumeReport",
    "Message",
    "Queue",
    "QueueStats",
    "RedriveReport",
    "errors",
    "spark_session",
]

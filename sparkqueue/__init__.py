"""sparkqueue: a distributed queue with Amazon SQS semantics whose messages live in Delta tables."""

from . import errors
from .broker import Broker
from .datasource import register
from .model import BatchResult, ConsumeReport, Message, MessageEvent, QueueStats, RedriveReport
from .queue import Queue
from .services.settings import RedriveSettings, UpkeepSettings
from .session import spark_session
from .store.transactions import RetryPolicy

__all__ = [
    "BatchResult",
    "Broker",
    "ConsumeReport",
    "Message",
    "MessageEvent",
    "Queue",
    "QueueStats",
    "RedriveReport",
    "RedriveSettings",
    "RetryPolicy",
    "UpkeepSettings",
    "errors",
    "register",
    "spark_session",
]

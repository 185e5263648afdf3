"""The exception tree: every failure a user can act on is a QueueError with an SQS-style code."""

from __future__ import annotations


class QueueError(Exception):
    """Root of every sparkqueue error; `code` is the SQS error name, for logs and batch results.

    `message` says what was wrong and what is allowed, for a Python caller. `sqs_message` is what
    SQS itself answers in the same case, in its own words where they are known (else `message`):
    what the SQS endpoint returns, since code and tests written against SQS match on its text."""

    code = "QueueError"
    sqs_words: str | None = None  # SQS's text for every error of the class, where it is fixed

    def __init__(self, message: str, *, sqs_message: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqs_message = sqs_message or self.sqs_words or message


def invalid_value(value: object, parameter: str, reason: str) -> str:
    """SQS's sentence for a parameter value it refuses (a `sqs_message`)."""
    return f"Value {value} for parameter {parameter} is invalid. Reason: {reason}."


class QueueDoesNotExist(QueueError):
    code = "QueueDoesNotExist"
    sqs_words = "The specified queue does not exist."


class SchemaDoesNotExist(QueueError):
    """A broker in catalog mode named a catalog or schema that is not there (or not readable)."""

    code = "SchemaDoesNotExist"


class QueueAlreadyExists(QueueError):
    code = "QueueAlreadyExists"


class InvalidParameterValue(QueueError):
    code = "InvalidParameterValue"


class MissingParameter(InvalidParameterValue):
    """A value the queue requires was not given (a FIFO message's group id, say)."""

    code = "MissingParameter"


class ReceiptHandleIsInvalid(QueueError):
    code = "ReceiptHandleIsInvalid"
    sqs_words = "The input receipt handle is invalid."

    def __init__(
        self, message: str, *, message_gone: bool = False, sqs_message: str | None = None
    ) -> None:
        super().__init__(message, sqs_message=sqs_message)
        self.message_gone = message_gone  # the handle was genuine but its message was deleted


class MessageNotInflight(QueueError):
    code = "MessageNotInflight"


class EmptyBatchRequest(QueueError):
    code = "EmptyBatchRequest"


class OverLimit(QueueError):
    code = "OverLimit"


class TransactionConflict(QueueError):
    code = "TransactionConflict"


class HeartbeatFailed(QueueError):
    """Raised when a heartbeat block exits after one or more extensions failed."""

    code = "HeartbeatFailed"


class UnsupportedOperation(QueueError):
    """The broker's engine cannot do this: a DataFrame method or a FIFO queue on a broker without
    a Spark session (`Broker(None, root)`), say. The message says what would."""

    code = "UnsupportedOperation"


__all__ = [
    "EmptyBatchRequest",
    "HeartbeatFailed",
    "InvalidParameterValue",
    "MessageNotInflight",
    "MissingParameter",
    "OverLimit",
    "QueueAlreadyExists",
    "QueueDoesNotExist",
    "QueueError",
    "ReceiptHandleIsInvalid",
    "TransactionConflict",
    "UnsupportedOperation",
]

"""SQS's errors as the endpoint returns them: the modelled name, the query protocol's code, the
HTTP status and whose fault it is; and the one mapping from sparkqueue's own exceptions."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import errors


@dataclass(frozen=True)
class FaultKind:
    """`name` is the JSON protocol's `__type` (the model's shape name); `code` what the query
    protocol and the `x-amzn-query-error` header carry, and what SDK users see."""

    name: str
    code: str
    status: int = 400
    sender: bool = True


def _kind(name: str, code: str | None = None, status: int = 400, sender: bool = True) -> FaultKind:
    return FaultKind(name, code or name, status, sender)


_SQS = "AWS.SimpleQueueService."
KINDS = {
    kind.name: kind
    for kind in (
        _kind("QueueDoesNotExist", _SQS + "NonExistentQueue"),
        _kind("QueueNameExists", "QueueAlreadyExists"),
        _kind("ReceiptHandleIsInvalid", status=404),
        _kind("MessageNotInflight", _SQS + "MessageNotInflight"),
        _kind("EmptyBatchRequest", _SQS + "EmptyBatchRequest"),
        _kind("TooManyEntriesInBatchRequest", _SQS + "TooManyEntriesInBatchRequest"),
        _kind("BatchEntryIdsNotDistinct", _SQS + "BatchEntryIdsNotDistinct"),
        _kind("InvalidBatchEntryId", _SQS + "InvalidBatchEntryId"),
        _kind("BatchRequestTooLong", _SQS + "BatchRequestTooLong"),
        _kind("UnsupportedOperation", _SQS + "UnsupportedOperation"),
        _kind("InvalidAttributeName"),
        _kind("InvalidAttributeValue"),
        _kind("InvalidMessageContents"),
        _kind("InvalidParameterValue"),
        _kind("MissingParameter"),
        _kind("OverLimit", status=403),
        _kind("PurgeQueueInProgress", _SQS + "PurgeQueueInProgress", status=403),
        _kind("ResourceNotFoundException", status=404),
        _kind("InvalidAction", status=400),
        _kind("SerializationException", "MalformedQueryString"),
        _kind("RequestEntityTooLarge", status=413),
        _kind("MissingAuthenticationToken", status=403),
        _kind("IncompleteSignature", status=403),
        _kind("InvalidClientTokenId", status=403),
        _kind("SignatureDoesNotMatch", status=403),
        _kind("RequestExpired", status=403),
        # the transport's refusals (endpoint/transport.py): no-keys requests a web page could
        # send, methods other than POST there, bodies without a length or sent in chunks
        _kind("AccessDenied", status=403),
        _kind("MethodNotAllowed", status=405),
        _kind("MissingContentLength", status=411),
        _kind("NotImplemented", status=501),
        _kind("ServiceUnavailable", status=503, sender=False),
        _kind("InternalError", status=500, sender=False),
    )
}

# sparkqueue's exceptions as SQS errors; a TransactionConflict (optimistic retries exhausted) is a
# 503, which every SDK retries.
_OF_QUEUE_ERROR = {
    errors.QueueDoesNotExist: "QueueDoesNotExist",
    errors.QueueAlreadyExists: "QueueNameExists",
    errors.MissingParameter: "MissingParameter",
    errors.InvalidParameterValue: "InvalidParameterValue",
    errors.ReceiptHandleIsInvalid: "ReceiptHandleIsInvalid",
    errors.MessageNotInflight: "MessageNotInflight",
    errors.EmptyBatchRequest: "EmptyBatchRequest",
    errors.OverLimit: "OverLimit",
    errors.TransactionConflict: "ServiceUnavailable",
}


# SQS's own words for its errors (from its API reference, its SDKs' models and recorded answers):
# code and tests written against SQS match on them.
NO_QUEUE = errors.QueueDoesNotExist.sqs_words
invalid_value = errors.invalid_value
# Characters XML 1.0 cannot carry: a refused value echoed in an error keeps the query
# protocol's answer well-formed with them written as \xNN.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def missing_parameter(parameter: str) -> str:
    return f"The request must contain the parameter {parameter}."


def unknown_attribute(name: str) -> str:
    return f"Unknown Attribute {name}."


def empty_batch(action: str) -> str:
    return f"There should be at least one {action}RequestEntry in the request."


def not_a_handle(handle: str) -> str:
    return f'The input receipt handle "{handle}" is not a valid receipt handle.'


class SqsFault(Exception):
    """An SQS error to return to the client; nothing the request asked for was done."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.kind = KINDS[name]
        self.message = _NOT_XML.sub(lambda found: f"\\x{ord(found[0]):02x}", message)


def fault_of(error: errors.QueueError) -> SqsFault:
    """The SQS error for a sparkqueue error (the most specific class that matches)."""
    for cls in type(error).__mro__:
        name = _OF_QUEUE_ERROR.get(cls)  # type: ignore[call-overload]
        if name is not None:
            return SqsFault(name, error.sqs_message)
    return SqsFault("InternalError", error.message)


def fault_named(code: str, message: str) -> SqsFault:
    """The SQS error for a sparkqueue error code, as a `BatchResult` reports one."""
    cls = next((c for c in _OF_QUEUE_ERROR if c.code == code), None)
    return SqsFault(_OF_QUEUE_ERROR[cls] if cls is not None else "InternalError", message)

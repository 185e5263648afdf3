"""The message actions: send, receive, delete and change visibility, one by one and in batches.

Typed attributes travel as SQS has them and are stored as sparkqueue keeps attributes: the value
as text (base64 for Binary) and, when it is not a plain String, its DataType in `attribute_types`,
so a message sent here and one sent from Spark are the same row.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ..errors import InvalidParameterValue, QueueError
from ..limits import MAX_WAIT_SECONDS
from ..model import Message
from ..rules.checks import check_int
from ..rules.validation import check_text
from .digest import TypedValue, md5_of_attributes, md5_of_body
from .faults import SqsFault, fault_named, fault_of
from .service import Request

MAX_RECEIVED = 10
MAX_BATCH = 10
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
SYSTEM_ATTRIBUTES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageDeduplicationId",
    "MessageGroupId",
)


def send_message(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entry, typed = _entry(request.params, queue.attributes["max_message_bytes"])
    message_id = queue.send(**entry)
    request.service.polls.arrived(queue.name)
    return _sent(message_id, entry["body"], typed)


def send_message_batch(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entries = _entries(request)
    limit = queue.attributes["max_message_bytes"]
    if sum(_size(e) for e in entries) > limit:
        raise SqsFault("BatchRequestTooLong", f"the batch's messages exceed {limit} bytes together")
    outcomes: dict[str, Any] = {}
    valid: list[tuple[str, dict[str, Any], dict[str, TypedValue]]] = []
    for item in entries:
        try:
            valid.append((item["Id"], *_entry(item, limit)))
        except (SqsFault, QueueError) as error:
            outcomes[item["Id"]] = error
    sent = queue.send_each([entry for _, entry, _ in valid]) if valid else []
    for (entry_id, entry, typed), result in zip(valid, sent, strict=True):
        outcomes[entry_id] = (
            result if isinstance(result, QueueError) else _sent(result, entry["body"], typed)
        )
    if valid:
        request.service.polls.arrived(queue.name)
    return _batch_result(entries, outcomes)


def receive_message(request: Request) -> dict[str, Any]:
    queue = request.queue()
    params = request.params
    count = check_int("MaxNumberOfMessages", params.get("MaxNumberOfMessages", 1), 1, MAX_RECEIVED)
    timeout = params.get("VisibilityTimeout")  # checked by Queue.receive
    wait = params.get("WaitTimeSeconds", queue.attributes["receive_wait_time_seconds"])
    check_int("WaitTimeSeconds", wait, 0, MAX_WAIT_SECONDS)
    system = _system_names(
        params.get("AttributeNames", []) + params.get("MessageSystemAttributeNames", [])
    )
    selectors = params.get("MessageAttributeNames", [])
    messages = request.service.polls.receive(queue, count, timeout, wait)
    return {"Messages": [_received(m, system, selectors) for m in messages] or None}


def delete_message(request: Request) -> dict[str, Any]:
    request.queue().delete(request.required("ReceiptHandle"))
    return {}


def delete_message_batch(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entries = _entries(request)
    handles = [_handle(item) for item in entries]
    done = queue.delete_batch(list(dict.fromkeys(handles)))
    return _batch_result(entries, _by_entry(entries, handles, done.failed))


def change_message_visibility(request: Request) -> dict[str, Any]:
    timeout = request.required("VisibilityTimeout")
    request.queue().change_visibility(request.required("ReceiptHandle"), timeout)
    return {}


def change_message_visibility_batch(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entries = _entries(request)
    handles = [_handle(item) for item in entries]
    if len(set(handles)) < len(handles):
        raise SqsFault("InvalidParameterValue", "two entries name the same ReceiptHandle")
    changes = []
    for item in entries:
        if item.get("VisibilityTimeout") is None:
            raise SqsFault("MissingParameter", f"entry {item['Id']} must give VisibilityTimeout")
        changes.append((item["ReceiptHandle"], item["VisibilityTimeout"]))
    done = queue.change_visibility_batch(changes)
    return _batch_result(entries, _by_entry(entries, handles, done.failed))


# -- sending ---------------------------------------------------------------------------------------


def _entry(params: dict[str, Any], limit: int) -> tuple[dict[str, Any], dict[str, TypedValue]]:
    """`Queue.send` keywords for one SendMessage (or batch entry), and its typed attributes."""
    body = params.get("MessageBody")
    if body is None:
        raise SqsFault("MissingParameter", "a message must give MessageBody")
    try:
        check_text("the message body", body)
    except InvalidParameterValue as error:
        raise SqsFault("InvalidMessageContents", error.message) from None
    if params.get("MessageSystemAttributes"):
        raise SqsFault("InvalidParameterValue", "MessageSystemAttributes are not supported here")
    typed = _typed(params.get("MessageAttributes", {}))
    if _size(params) > limit:
        raise SqsFault("InvalidParameterValue", f"the message must be shorter than {limit} bytes")
    entry = {
        "body": body,
        "delay_seconds": params.get("DelaySeconds"),
        "attributes": {name: _stored(value) for name, value in typed.items()} or None,
        "attribute_types": {n: v.data_type for n, v in typed.items() if v.data_type != "String"}
        or None,
        "group_id": params.get("MessageGroupId"),
        "deduplication_id": params.get("MessageDeduplicationId"),
    }
    return entry, typed


def _typed(attributes: dict[str, Any]) -> dict[str, TypedValue]:
    typed = {}
    for name, value in attributes.items():
        data_type = value.get("DataType")
        if data_type is None:
            raise SqsFault("MissingParameter", f"message attribute {name!r} must give DataType")
        binary = data_type.startswith("Binary")
        given = value.get("BinaryValue" if binary else "StringValue")
        if given is None or (value.get("StringValue") is not None and binary):
            kind = "BinaryValue" if binary else "StringValue"
            raise SqsFault(
                "InvalidParameterValue", f"message attribute {name!r} ({data_type}) needs {kind}"
            )
        typed[name] = TypedValue(data_type, given)
    return typed


def _stored(value: TypedValue) -> str:
    if isinstance(value.value, bytes):
        return base64.b64encode(value.value).decode("ascii")
    return value.value


def _size(params: dict[str, Any]) -> int:
    """SQS's message size: the body and each attribute's name, DataType and value, in bytes."""
    size = len(str(params.get("MessageBody") or "").encode("utf-8"))
    for name, value in (params.get("MessageAttributes") or {}).items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8"))
        raw = value.get("BinaryValue") or str(value.get("StringValue") or "").encode("utf-8")
        size += len(raw)
    return size


def _sent(message_id: str, body: str, typed: dict[str, TypedValue]) -> dict[str, Any]:
    return {
        "MessageId": message_id,
        "MD5OfMessageBody": md5_of_body(body),
        "MD5OfMessageAttributes": md5_of_attributes(typed),
    }


# -- receiving -------------------------------------------------------------------------------------


def _system_names(names: list[str]) -> list[str]:
    if "All" in names:
        return list(SYSTEM_ATTRIBUTES)
    unknown = [n for n in names if n not in SYSTEM_ATTRIBUTES and n != "AWSTraceHeader"]
    if unknown:
        raise SqsFault("InvalidAttributeName", f"unknown attribute name {unknown[0][:80]!r}")
    return names


def _selected(name: str, selectors: list[str]) -> bool:
    """SQS's MessageAttributeNames: All or .*, a name, or a prefix followed by .*"""
    return any(
        s in ("All", ".*") or s == name or (s.endswith(".*") and name.startswith(s[:-1]))
        for s in selectors
    )


def _received(message: Message, system: list[str], selectors: list[str]) -> dict[str, Any]:
    typed = {
        name: _typed_value(message.attribute_types.get(name, "String"), value)
        for name, value in message.attributes.items()
        if _selected(name, selectors)
    }
    values = {
        "SenderId": "sparkqueue",
        "SentTimestamp": str(int(message.sent_at.timestamp() * 1000)),
        "ApproximateReceiveCount": str(message.receive_count),
        "ApproximateFirstReceiveTimestamp": str(
            int((message.first_received_at or message.sent_at).timestamp() * 1000)
        ),
        "SequenceNumber": None if message.sequence_number is None else str(message.sequence_number),
        "MessageDeduplicationId": message.deduplication_id,
        "MessageGroupId": message.group_id,
    }
    return {
        "MessageId": message.message_id,
        "ReceiptHandle": message.receipt_handle,
        "MD5OfBody": md5_of_body(message.body),
        "Body": message.body,
        "Attributes": {n: values[n] for n in system if values.get(n) is not None} or None,
        "MD5OfMessageAttributes": md5_of_attributes(typed),
        "MessageAttributes": {
            name: (
                {"DataType": v.data_type, "BinaryValue": v.value}
                if v.is_binary
                else {"DataType": v.data_type, "StringValue": v.value}
            )
            for name, v in typed.items()
        }
        or None,
    }


def _typed_value(data_type: str, stored: str) -> TypedValue:
    if data_type.startswith("Binary"):
        return TypedValue(data_type, base64.b64decode(stored))
    return TypedValue(data_type, stored)


# -- batches ---------------------------------------------------------------------------------------


def _entries(request: Request) -> list[dict[str, Any]]:
    """A batch's entries, checked as SQS checks them before doing any."""
    entries = request.params.get("Entries") or []
    if not entries:
        raise SqsFault("EmptyBatchRequest", "the batch has no entries")
    if len(entries) > MAX_BATCH:
        raise SqsFault("TooManyEntriesInBatchRequest", f"a batch has at most {MAX_BATCH} entries")
    ids = [item.get("Id") for item in entries]
    for entry_id in ids:
        if entry_id is None or not _ENTRY_ID.fullmatch(entry_id):
            raise SqsFault(
                "InvalidBatchEntryId",
                "entry ids are 1 to 80 characters of A-Z, a-z, 0-9, '-' and '_'",
            )
    if len(set(ids)) < len(ids):
        raise SqsFault("BatchEntryIdsNotDistinct", "two entries have the same Id")
    return entries


def _handle(item: dict[str, Any]) -> str:
    handle = item.get("ReceiptHandle")
    if handle is None:
        raise SqsFault("MissingParameter", f"entry {item['Id']} must give ReceiptHandle")
    return handle


def _by_entry(
    entries: list[dict[str, Any]], handles: list[str], failed: dict[str, str]
) -> dict[str, Any]:
    return {
        item["Id"]: fault_named(failed[handle], f"{failed[handle]} for this entry")
        if handle in failed
        else {"Id": item["Id"]}
        for item, handle in zip(entries, handles, strict=True)
    }


def _batch_result(entries: list[dict[str, Any]], outcomes: dict[str, Any]) -> dict[str, Any]:
    successful, failed = [], []
    for item in entries:
        outcome = outcomes[item["Id"]]
        if isinstance(outcome, (SqsFault, QueueError)):
            fault = outcome if isinstance(outcome, SqsFault) else fault_of(outcome)
            failed.append(
                {
                    "Id": item["Id"],
                    "SenderFault": fault.kind.sender,
                    "Code": fault.kind.code,
                    "Message": fault.message,
                }
            )
        else:
            successful.append({**outcome, "Id": item["Id"]})
    return {"Successful": successful, "Failed": failed}

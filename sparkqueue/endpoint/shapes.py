"""Messages as SQS spells them, both ways: a SendMessage (or batch entry) as `Queue.send`
keywords, and a sparkqueue `Message` as ReceiveMessage returns it.

Typed attributes travel as SQS has them and are stored as sparkqueue keeps attributes: the value
as text (base64 for Binary) and, when it is not a plain String, its DataType in `attribute_types`,
so a message sent here and one sent from Spark are the same row. The one system attribute a
sender may set, AWSTraceHeader, is kept in `attribute_types` too, under a name no attribute can
have (`rules.validation.system_key`).
"""

from __future__ import annotations

import base64
from typing import Any

from ..errors import InvalidParameterValue
from ..model import Message, SentMessage
from ..rules.validation import SENDER_SYSTEM_ATTRIBUTES, check_text, system_key
from .digest import TypedValue, md5_of_attributes, md5_of_body
from .faults import SqsFault, missing_parameter, unknown_attribute

SYSTEM_ATTRIBUTES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageDeduplicationId",
    "MessageGroupId",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)


# -- sending ---------------------------------------------------------------------------------------


NO_DEDUPLICATION = (
    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId"
    " provided explicitly"
)


def check_fifo_send(params: dict[str, Any], attributes: dict[str, Any]) -> None:
    """SQS's codes for what a FIFO send lacks (the Python API says MissingParameter to both)."""
    if not attributes["fifo"]:
        return
    if params.get("MessageGroupId") is None:
        raise SqsFault("MissingParameter", missing_parameter("MessageGroupId"))
    if (
        params.get("MessageDeduplicationId") is None
        and not attributes["content_based_deduplication"]
    ):
        raise SqsFault("InvalidParameterValue", NO_DEDUPLICATION)


def entry_of(params: dict[str, Any], limit: int) -> tuple[dict[str, Any], dict[str, TypedValue]]:
    """`Queue.send` keywords for one SendMessage (or batch entry), and its typed attributes."""
    body = params.get("MessageBody")
    if body is None:
        raise SqsFault("MissingParameter", missing_parameter("MessageBody"))
    try:
        check_text("the message body", body)
    except InvalidParameterValue as error:
        raise SqsFault("InvalidMessageContents", error.message) from None
    system = system_values(params.get("MessageSystemAttributes", {}))
    typed = typed_of(params.get("MessageAttributes", {}))
    if size_of(params) > limit:
        raise SqsFault(
            "InvalidParameterValue",
            f"One or more parameters are invalid. Reason: Message must be shorter than {limit}"
            " bytes.",
        )
    types = {n: v.data_type for n, v in typed.items() if v.data_type != "String"}
    entry = {
        "body": body,
        "delay_seconds": params.get("DelaySeconds"),
        "attributes": {name: stored(value) for name, value in typed.items()} or None,
        "attribute_types": {**types, **{system_key(n): v for n, v in system.items()}} or None,
        "group_id": params.get("MessageGroupId"),
        "deduplication_id": params.get("MessageDeduplicationId"),
    }
    return entry, typed


def system_values(attributes: dict[str, Any]) -> dict[str, str]:
    """MessageSystemAttributes on send: AWSTraceHeader, a String (SQS takes no other)."""
    values = {}
    for name, value in attributes.items():
        if name not in SENDER_SYSTEM_ATTRIBUTES:
            raise SqsFault(
                "InvalidParameterValue",
                f"the message system attribute {name[:80]!r} cannot be sent; only"
                f" {', '.join(SENDER_SYSTEM_ATTRIBUTES)}",
            )
        if value.get("DataType") != "String" or value.get("StringValue") is None:
            raise SqsFault("InvalidParameterValue", f"{name} must be a String with a StringValue")
        values[name] = value["StringValue"]
    return values


def typed_of(attributes: dict[str, Any]) -> dict[str, TypedValue]:
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


def stored(value: TypedValue) -> str:
    if isinstance(value.value, bytes):
        return base64.b64encode(value.value).decode("ascii")
    return value.value


def size_of(params: dict[str, Any]) -> int:
    """SQS's message size: the body and each attribute's name, DataType and value, in bytes."""
    size = len(str(params.get("MessageBody") or "").encode("utf-8"))
    for name, value in (params.get("MessageAttributes") or {}).items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8"))
        raw = value.get("BinaryValue") or str(value.get("StringValue") or "").encode("utf-8")
        size += len(raw)
    return size


def sent_result(
    sent: SentMessage, entry: dict[str, Any], typed: dict[str, TypedValue]
) -> dict[str, Any]:
    system = {
        name[len(system_key("")) :]: TypedValue("String", value)
        for name, value in (entry["attribute_types"] or {}).items()
        if name.startswith(system_key(""))
    }
    return {
        "MessageId": sent.message_id,
        "MD5OfMessageBody": md5_of_body(entry["body"]),
        "MD5OfMessageAttributes": md5_of_attributes(typed),
        "MD5OfMessageSystemAttributes": md5_of_attributes(system),
        "SequenceNumber": None if sent.sequence_number is None else str(sent.sequence_number),
    }


# -- receiving -------------------------------------------------------------------------------------


def system_names(names: list[str]) -> list[str]:
    if "All" in names:
        return list(SYSTEM_ATTRIBUTES)
    unknown = [n for n in names if n not in SYSTEM_ATTRIBUTES and n != "AWSTraceHeader"]
    if unknown:
        raise SqsFault("InvalidAttributeName", unknown_attribute(unknown[0][:80]))
    return names


def selected(name: str, selectors: list[str]) -> bool:
    """SQS's MessageAttributeNames: All or .*, a name, or a prefix followed by .*"""
    return any(
        s in ("All", ".*") or s == name or (s.endswith(".*") and name.startswith(s[:-1]))
        for s in selectors
    )


def received(
    message: Message, system: list[str], selectors: list[str], source_arn: str | None = None
) -> dict[str, Any]:
    """A received message as ReceiveMessage answers it; `source_arn`: the queue whose redrive
    policy moved it to this (dead-letter) queue."""
    typed = {
        name: typed_value(message.attribute_types.get(name, "String"), value)
        for name, value in message.attributes.items()
        if selected(name, selectors)
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
        "AWSTraceHeader": message.attribute_types.get(system_key("AWSTraceHeader")),
        "DeadLetterQueueSourceArn": source_arn,
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


def typed_value(data_type: str, stored: str) -> TypedValue:
    if data_type.startswith("Binary"):
        return TypedValue(data_type, base64.b64decode(stored))
    return TypedValue(data_type, stored)

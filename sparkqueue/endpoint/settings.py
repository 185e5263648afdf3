"""Queue attributes as SQS names and spells them (strings, a redrive policy in JSON) and as a
sparkqueue `Queue` keeps them, both ways."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..attributes import FIFO_MODES, MAX_REDRIVE_SOURCES, RANGES, REDRIVE_PERMISSIONS
from ..limits import MAX_KMS_REUSE_SECONDS, MAX_POLICY_CHARACTERS, MIN_KMS_REUSE_SECONDS
from ..model import QueueStats
from .faults import SqsFault, unknown_attribute
from .naming import Naming

# SQS attribute -> the QueueAttributes field it sets, for the plain whole-number ones.
NUMBERS = {
    "DelaySeconds": "delay_seconds",
    "MaximumMessageSize": "max_message_bytes",
    "MessageRetentionPeriod": "retention_seconds",
    "ReceiveMessageWaitTimeSeconds": "receive_wait_time_seconds",
    "VisibilityTimeout": "visibility_timeout",
}
FLAGS = {"FifoQueue": "fifo", "ContentBasedDeduplication": "content_based_deduplication"}
# SQS attributes clients set and read back, stored in SQS's spelling in
# `QueueAttributes.sqs_metadata`: access policies and encryption settings (at rest, the storage's
# own), kept but not acted on, and the high-throughput FIFO modes (attributes.FIFO_MODES). An
# empty Policy or KmsMasterKeyId removes it.
METADATA = (
    "Policy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
    "DeduplicationScope",
    "FifoThroughputLimit",
)
FIFO_ONLY = {"DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"}  # and defaults
REMOVABLE = frozenset({"Policy", "KmsMasterKeyId"})
SETTABLE = {*NUMBERS, *FLAGS, *METADATA, "RedrivePolicy", "RedriveAllowPolicy"}
COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
READABLE = (*SETTABLE, *COUNTS, "QueueArn", "CreatedTimestamp", "LastModifiedTimestamp")
MAX_KMS_KEY_ID = 2048


def to_keywords(attributes: dict[str, str], naming: Naming, *, fifo: bool) -> dict[str, Any]:
    """`Broker.create_queue` / `Queue.set_attributes` keywords for SQS attributes (of a FIFO queue
    or not); SQS-only ones come as `sqs_metadata`, "" where one is removed."""
    keywords: dict[str, Any] = {}
    metadata: dict[str, str] = {}
    for name, text in attributes.items():
        if name in NUMBERS:
            field = NUMBERS[name]
            keywords[field] = _whole_number(name, text, *RANGES[field])
        elif name in FLAGS:
            keywords[FLAGS[name]] = _flag(name, text)
        elif name == "RedrivePolicy":
            keywords.update(_redrive_policy(text, naming))
        elif name == "RedriveAllowPolicy":
            keywords["redrive_allow_policy"] = _redrive_allow_policy(text, naming)
        elif name in METADATA:
            if name in FIFO_ONLY and not fifo:
                raise SqsFault("InvalidAttributeName", unknown_attribute(name))  # as SQS answers
            metadata[name] = _metadata_value(name, text)
        else:
            raise SqsFault("InvalidAttributeName", unknown_attribute(name[:80]))
    if metadata:
        keywords["sqs_metadata"] = metadata
    return keywords


def merged_metadata(stored: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """The stored SQS-only attributes with `given` applied ("" removes one)."""
    return {name: value for name, value in {**stored, **given}.items() if value != ""}


def metadata_value(attributes: dict[str, Any], name: str) -> str | None:
    """An SQS-only attribute as GetQueueAttributes reports it (FIFO modes have defaults)."""
    value = attributes["sqs_metadata"].get(name)
    if value is None and attributes["fifo"]:
        return FIFO_ONLY.get(name)
    return value


def check_names(names: list[str]) -> list[str]:
    """The attribute names GetQueueAttributes asked for (All: every one)."""
    if "All" in names:
        return list(READABLE)
    unknown = [name for name in names if name not in READABLE]
    if unknown:
        raise SqsFault("InvalidAttributeName", unknown_attribute(unknown[0][:80]))
    return names


def to_sqs(
    name: str,
    attributes: dict[str, Any],
    wanted: list[str],
    naming: Naming,
    stats: Callable[[], QueueStats],
) -> dict[str, str]:
    """The wanted SQS attributes of the queue `name` (counts only when asked: they cost a read)."""
    values: dict[str, str] = {}
    for sqs_name, field in NUMBERS.items():
        values[sqs_name] = str(attributes[field])
    values["QueueArn"] = naming.arn(name)
    values["CreatedTimestamp"] = str(int(attributes["created_at"]))
    values["LastModifiedTimestamp"] = str(int(attributes["modified_at"]))
    if attributes["fifo"]:
        values["FifoQueue"] = "true"
        values["ContentBasedDeduplication"] = str(attributes["content_based_deduplication"]).lower()
    if attributes["dead_letter_queue"] is not None:
        values["RedrivePolicy"] = json.dumps(
            {
                "deadLetterTargetArn": naming.arn(attributes["dead_letter_queue"]),
                "maxReceiveCount": attributes["max_receive_count"],
            }
        )
    if attributes["redrive_allow_policy"] is not None:
        values["RedriveAllowPolicy"] = attributes["redrive_allow_policy"]
    for sqs_name in METADATA:
        value = metadata_value(attributes, sqs_name)
        if value is not None:
            values[sqs_name] = value
    if any(count in wanted for count in COUNTS):
        depth = stats()
        counts = (depth.visible, depth.in_flight, depth.delayed)
        values.update(zip(COUNTS, map(str, counts), strict=True))
    return {key: value for key, value in values.items() if key in wanted}


def _whole_number(name: str, text: str, low: int, high: int) -> int:
    """SQS answers InvalidAttributeValue for a number out of its range, on create as on set."""
    if not re.fullmatch(r"[0-9]{1,9}", text) or not low <= int(text) <= high:
        raise _bad_value(name)
    return int(text)


def _flag(name: str, text: str) -> bool:
    if text not in ("true", "false"):
        raise _bad_value(name)
    return text == "true"


def _metadata_value(name: str, text: str) -> str:
    """An SQS-only attribute's value, checked as SQS checks it ("" to remove a removable one)."""
    if text == "" and name in REMOVABLE:
        return ""
    if name == "Policy":
        document = _json_object("Policy", text)
        statements = document.get("Statement", [])
        if len(text) > MAX_POLICY_CHARACTERS or not isinstance(statements, (list, dict)):
            raise _bad_value(name)  # a document of up to MAX_POLICY_CHARACTERS, Statement a list
        return json.dumps(document)
    if name == "KmsMasterKeyId":
        if not re.fullmatch(rf"[!-~]{{1,{MAX_KMS_KEY_ID}}}", text):
            raise _bad_value(name)
        return text
    if name == "KmsDataKeyReusePeriodSeconds":
        return str(_whole_number(name, text, MIN_KMS_REUSE_SECONDS, MAX_KMS_REUSE_SECONDS))
    if name == "SqsManagedSseEnabled":
        return str(_flag(name, text)).lower()
    if text not in FIFO_MODES[name]:
        raise _bad_value(name)
    return text


def _redrive_policy(text: str, naming: Naming) -> dict[str, Any]:
    if text == "":
        return {"dead_letter_queue": None, "max_receive_count": None}
    document = _json_object("RedrivePolicy", text)
    target, count = document.get("deadLetterTargetArn"), document.get("maxReceiveCount")
    if not isinstance(target, str) or count is None:
        raise _bad_value("RedrivePolicy")
    if isinstance(count, str) and re.fullmatch(r"[0-9]{1,4}", count):
        count = int(count)
    if isinstance(count, bool) or not isinstance(count, int):
        raise _bad_value("RedrivePolicy")
    name = naming.name_of_arn(target, "deadLetterTargetArn")
    return {"dead_letter_queue": name, "max_receive_count": count}


def _redrive_allow_policy(text: str, naming: Naming) -> str | None:
    if text == "":
        return None
    document = _json_object("RedriveAllowPolicy", text)
    permission = document.get("redrivePermission")
    sources = document.get("sourceQueueArns", [])
    if permission not in REDRIVE_PERMISSIONS:
        raise _bad_value("RedriveAllowPolicy")
    if not isinstance(sources, list) or len(sources) > MAX_REDRIVE_SOURCES:
        raise _bad_value("RedriveAllowPolicy")
    if (permission == "byQueue") != bool(sources):
        raise _bad_value("RedriveAllowPolicy")
    for arn in sources:
        naming.name_of_arn(arn if isinstance(arn, str) else "", "a sourceQueueArn")
    normal: dict[str, Any] = {"redrivePermission": permission}
    if sources:
        normal["sourceQueueArns"] = sources
    return json.dumps(normal)


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise _bad_value(name)
    return document


def _bad_value(name: str) -> SqsFault:
    """SQS's answer names the attribute alone (what each takes: docs/endpoint.md, and the check
    that raises it)."""
    return SqsFault("InvalidAttributeValue", f"Invalid value for the parameter {name}.")

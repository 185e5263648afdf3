"""The message actions: send, receive, delete and change visibility, one by one and in batches
(how a message is spelled both ways is `shapes.py`)."""

from __future__ import annotations

import logging
import re
from typing import Any

from ..errors import QueueError, ReceiptHandleIsInvalid
from ..limits import MAX_BATCH_BYTES, MAX_VISIBILITY_SECONDS, MAX_WAIT_SECONDS
from ..model import Message
from ..queue import Queue
from ..rules.checks import check_int
from .digest import TypedValue
from .faults import (
    SqsFault,
    empty_batch,
    fault_named,
    fault_of,
    invalid_value,
    missing_parameter,
    not_a_handle,
)
from .service import Request, action
from .shapes import (
    NO_DEDUPLICATION,
    check_fifo_send,
    entry_of,
    received,
    sent_result,
    size_of,
    system_names,
)

MAX_RECEIVED = 10
MOVES_AT_RECEIVE = 100  # the most messages one receive moves to its dead-letter queue
log = logging.getLogger(__name__)
MAX_BATCH = 10
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
# What SQS answers ChangeMessageVisibility with an authentic handle that is no longer current
# (a later receive superseded it, or the message is gone).
NOT_AVAILABLE = "Message does not exist or is not available for visibility timeout change"


@action
def send_message(request: Request) -> dict[str, Any]:
    queue = request.queue()
    attributes = queue.attributes
    check_fifo_send(request.params, attributes)
    entry, typed = entry_of(request.params, attributes["max_message_bytes"])
    [result] = queue.send_messages([entry])
    if isinstance(result, QueueError):
        raise result
    request.service.polls.arrived(queue.name)
    return sent_result(result, entry, typed)


@action
def send_message_batch(request: Request) -> dict[str, Any]:
    """Valid entries go in one commit, each bad one is reported in Failed; but a batch over SQS's
    total size, or a FIFO entry without MessageGroupId (or, without content-based
    deduplication, without MessageDeduplicationId) fails the whole call (as in SQS)."""
    queue = request.queue()
    entries = _entries(request, "SendMessageBatch")
    size = sum(size_of(e) for e in entries)
    if size > MAX_BATCH_BYTES:
        raise SqsFault(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {size}"
            " bytes.",
        )
    attributes = queue.attributes
    if attributes["fifo"]:
        for item in entries:
            if item.get("MessageGroupId") is None:
                raise SqsFault("MissingParameter", missing_parameter("MessageGroupId"))
            if not attributes["content_based_deduplication"] and not item.get(
                "MessageDeduplicationId"
            ):
                raise SqsFault("InvalidParameterValue", NO_DEDUPLICATION)
    outcomes: dict[str, Any] = {}
    valid: list[tuple[str, dict[str, Any], dict[str, TypedValue]]] = []
    for item in entries:
        try:
            check_fifo_send(item, attributes)
            valid.append((item["Id"], *entry_of(item, attributes["max_message_bytes"])))
        except (SqsFault, QueueError) as error:
            outcomes[item["Id"]] = error
    sent = queue.send_messages([entry for _, entry, _ in valid]) if valid else []
    for (entry_id, entry, typed), result in zip(valid, sent, strict=True):
        outcomes[entry_id] = (
            result if isinstance(result, QueueError) else sent_result(result, entry, typed)
        )
    if valid:
        request.service.polls.arrived(queue.name)
    return _batch_result(entries, outcomes)


@action
def receive_message(request: Request) -> dict[str, Any]:
    queue = request.queue()
    params = request.params
    count = _whole(params.get("MaxNumberOfMessages", 1), "MaxNumberOfMessages", 1, MAX_RECEIVED)
    timeout = params.get("VisibilityTimeout")
    if timeout is not None:
        _whole(timeout, "VisibilityTimeout", 0, MAX_VISIBILITY_SECONDS)
    wait = params.get("WaitTimeSeconds", queue.attributes["receive_wait_time_seconds"])
    _whole(wait, "WaitTimeSeconds", 0, MAX_WAIT_SECONDS)
    system = system_names(
        params.get("AttributeNames", []) + params.get("MessageSystemAttributeNames", [])
    )
    selectors = params.get("MessageAttributeNames", [])
    moves = queue.attributes["dead_letter_queue"] is not None and request.service.moves_at_receive(
        queue.name
    )

    def take() -> list[Message]:
        """Messages now; as SQS, one that used up its receives goes to the dead-letter queue
        at the receive that finds it (a short receive looks for such, native engine only). The
        move comes before a second receive, never in the way of messages already received."""
        messages = queue.receive(count, visibility_timeout=timeout)
        if moves and len(messages) < count and _moved_to_dead_letters(queue):
            messages += queue.receive(count - len(messages), visibility_timeout=timeout)
        return messages

    messages = request.service.polls.receive(queue.name, take, wait, request.connected)
    if messages:
        request.undelivered.append(lambda: _give_back(request, queue, messages))
    arns = _dead_letter_sources(request, queue.name, messages, system)
    answers = [received(m, system, selectors, arns.get(m.moved_from or "")) for m in messages]
    return {"Messages": answers or None}


def _dead_letter_sources(
    request: Request, name: str, messages: list[Message], system: list[str]
) -> dict[str, str]:
    """The ARNs of the queues these messages were moved from as their dead-letter queue (not
    those a move brought back), when DeadLetterQueueSourceArn is asked for and one was moved."""
    moved = {m.moved_from for m in messages if m.moved_from is not None}
    if not moved or "DeadLetterQueueSourceArn" not in system:
        return {}
    sources = set(request.service.sources_of(name, fresh=False))  # a receive: cached will do
    return {source: request.service.naming.arn(source) for source in moved & sources}


def _give_back(request: Request, queue: Queue, messages: list[Message]) -> None:
    """Messages received for a client that went away before their answer reached it (a long
    poll given up): visible again at once rather than hidden for their timeout. Their receive
    stays counted, as SQS counts a receive whose answer was lost; a handle that is no longer
    current (received again meanwhile) changes nothing."""
    queue.change_visibility_batch([(message.receipt_handle, 0) for message in messages])
    request.service.polls.arrived(queue.name)  # waiting receives look now


def _moved_to_dead_letters(queue: Queue) -> int:
    """A receive's dead-letter moves: any failure (a conflict, a dead-letter queue being
    deleted) is logged and left to the redrive pass."""
    try:
        return queue.move_to_dead_letter_queue(limit=MOVES_AT_RECEIVE)
    except Exception:
        log.warning("dead-letter moves at a receive on %r failed", queue.name, exc_info=True)
        return 0


@action
def delete_message(request: Request) -> dict[str, Any]:
    """Deletes the message. An authentic handle that is no longer current (a later receive
    superseded it, or the message is gone) succeeds and deletes nothing, as SQS documents ("the
    request will succeed, but the message might not be deleted"); a malformed or forged one is
    ReceiptHandleIsInvalid. `Queue.delete` itself keeps the stricter error."""
    queue = request.queue()
    handle = request.required("ReceiptHandle")
    try:
        queue.delete(handle)
    except ReceiptHandleIsInvalid:
        if not request.service.authentic(queue, handle):
            raise
    return {}


@action
def delete_message_batch(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entries = _entries(request, "DeleteMessageBatch")
    handles = [_handle(item) for item in entries]
    done = queue.delete_batch(list(dict.fromkeys(handles)))
    failed = {
        handle: code
        for handle, code in done.failed.items()
        if code != ReceiptHandleIsInvalid.code or not request.service.authentic(queue, handle)
    }
    return _batch_result(entries, _by_entry(entries, handles, failed))


@action
def change_message_visibility(request: Request) -> dict[str, Any]:
    """Changes the message's visibility. An authentic handle of an earlier receive changes the
    message's latest receive while it is in flight, as SQS applies it; once the message is gone
    it is InvalidParameterValue ("Message does not exist or is not available for visibility
    timeout change"), as SQS answers it: the change did not happen, so it must not look as if
    it had."""
    timeout = request.required("VisibilityTimeout")
    queue = request.queue()
    handle = request.required("ReceiptHandle")
    _whole(timeout, "VisibilityTimeout", 0, MAX_VISIBILITY_SECONDS)
    try:
        queue.change_visibility(handle, timeout, latest_receive=True)
    except ReceiptHandleIsInvalid:
        if not request.service.authentic(queue, handle):
            raise
        raise _not_available(handle) from None
    return {}


@action
def change_message_visibility_batch(request: Request) -> dict[str, Any]:
    queue = request.queue()
    entries = _entries(request, "ChangeMessageVisibilityBatch")
    handles = [_handle(item) for item in entries]
    if len(set(handles)) < len(handles):
        raise SqsFault("InvalidParameterValue", "two entries name the same ReceiptHandle")
    changes = []
    for item in entries:
        if item.get("VisibilityTimeout") is None:
            raise SqsFault("MissingParameter", f"entry {item['Id']} must give VisibilityTimeout")
        changes.append((item["ReceiptHandle"], item["VisibilityTimeout"]))
    done = queue.change_visibility_batch(changes, latest_receive=True)
    outcomes = _by_entry(entries, handles, done.failed)
    for item, handle in zip(entries, handles, strict=True):
        invalid = done.failed.get(handle) == ReceiptHandleIsInvalid.code
        if invalid and request.service.authentic(queue, handle):
            outcomes[item["Id"]] = _not_available(handle)
    return _batch_result(entries, outcomes)


def _not_available(handle: str) -> SqsFault:
    return SqsFault(
        "InvalidParameterValue", invalid_value(handle[:200], "ReceiptHandle", NOT_AVAILABLE)
    )


# -- batches ---------------------------------------------------------------------------------------


def _whole(value: Any, name: str, low: int, high: int) -> int:
    """A whole-number parameter within SQS's range, refused in SQS's words."""
    return check_int(name, value, low, high, sqs_name=name)


def _entries(request: Request, call: str) -> list[dict[str, Any]]:
    """A batch's entries, checked as SQS checks them before doing any (`call`: the action's
    name, which SQS's answer to an empty batch names)."""
    entries = request.params.get("Entries") or []
    if not entries:
        raise SqsFault("EmptyBatchRequest", empty_batch(call))
    if len(entries) > MAX_BATCH:
        raise SqsFault(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(entries)}.",
        )
    ids = [item.get("Id") for item in entries]
    for entry_id in ids:
        if entry_id is None or not _ENTRY_ID.fullmatch(entry_id):
            raise SqsFault(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and"
                " underscores. It can be at most 80 letters long.",
            )
    repeated = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
    if repeated is not None:
        raise SqsFault("BatchEntryIdsNotDistinct", f"Id {repeated} repeated.")
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
        item["Id"]: fault_named(failed[handle], _entry_words(failed[handle], handle))
        if handle in failed
        else {"Id": item["Id"]}
        for item, handle in zip(entries, handles, strict=True)
    }


def _entry_words(code: str, handle: str) -> str:
    """SQS's words for a batch entry's failure."""
    if code == ReceiptHandleIsInvalid.code:
        return not_a_handle(handle[:200])
    return f"{code} for this entry"


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

"""The queue actions: create, find, list, delete, attributes, tags, purge, dead-letter sources
and message move tasks. Each takes a `Request` and returns the output shape's members."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from ..attributes import MAX_TAGS, takes_dead_letters_from
from ..errors import InvalidParameterValue
from ..limits import MAX_MESSAGE_BYTES
from ..queue import Queue
from . import permissions, settings
from .faults import NO_QUEUE, SqsFault, missing_parameter
from .service import Request, action

DEFAULT_LISTED = 1000  # ListQueues without MaxResults, as SQS


@action
def create_queue(request: Request) -> dict[str, Any]:
    """Creates the queue, or returns the URL of an existing one whose attributes agree with the
    ones given (SQS compares only what the request names; tags are never compared). A queue
    created here without MaximumMessageSize gets SQS's default, the largest size."""
    name = request.required("QueueName")
    given = request.params.get("Attributes", {})
    fifo = given.get("FifoQueue") == "true"
    keywords = settings.to_keywords(given, request.service.naming, fifo=fifo)
    if not fifo and name.endswith(".fifo"):
        raise SqsFault("InvalidParameterValue", "a FIFO queue needs the attribute FifoQueue=true")
    found = request.service.find(name)
    if found is not None:
        existing = found.attributes
        metadata = keywords.pop("sqs_metadata", {})
        differ = sorted(k for k, v in keywords.items() if existing.get(k) != v)
        differ += sorted(
            k for k, v in metadata.items() if settings.metadata_value(existing, k) != (v or None)
        )
        if differ:
            raise SqsFault(
                "QueueNameExists",
                f"queue {name!r} exists with other values of {', '.join(differ)}",
            )
        return {"QueueUrl": request.url(name)}
    _check_dead_letter_target(request, name, keywords)
    keywords.setdefault("max_message_bytes", MAX_MESSAGE_BYTES)
    if "sqs_metadata" in keywords:
        keywords["sqs_metadata"] = settings.merged_metadata({}, keywords["sqs_metadata"])
    queue = request.service.broker.create_queue(
        name, **keywords, tags=request.params.get("tags") or {}
    )
    request.service.queues.remember(name, queue)
    return {"QueueUrl": request.url(name)}


@action
def get_queue_url(request: Request) -> dict[str, Any]:
    name = request.required("QueueName")
    if request.service.find(name) is None:
        raise SqsFault("QueueDoesNotExist", NO_QUEUE)
    return {"QueueUrl": request.url(name)}


@action
def list_queues(request: Request) -> dict[str, Any]:
    prefix = request.params.get("QueueNamePrefix", "")
    names = request.service.broker.list_queues(prefix)
    return _page(request, names, "QueueUrls")


@action
def delete_queue(request: Request) -> dict[str, Any]:
    """By name, not through a lookup: a queue a crash left registered without its table (which a
    lookup reports as absent) must still be deletable."""
    name = request.queue_name()
    request.service.queues.forget(name)
    request.service.broker.delete_queue(name)
    return {}


@action
def get_queue_attributes(request: Request) -> dict[str, Any]:
    """The attributes named; none (no `Attributes` at all) when the request names none, as SQS."""
    queue = request.queue()
    wanted = settings.check_names(request.params.get("AttributeNames", []))
    values = settings.to_sqs(
        queue.name, queue.attributes, wanted, request.service.naming, queue.stats
    )
    return {"Attributes": values or None}


@action
def set_queue_attributes(request: Request) -> dict[str, Any]:
    queue = request.queue()
    given = request.required("Attributes")

    def changes(current: dict[str, Any]) -> dict[str, Any]:
        keywords = settings.to_keywords(given, request.service.naming, fifo=current["fifo"])
        if "sqs_metadata" in keywords:
            keywords["sqs_metadata"] = settings.merged_metadata(
                current["sqs_metadata"], keywords["sqs_metadata"]
            )
        _check_dead_letter_target(request, queue.name, keywords)
        return keywords

    try:
        queue.update_attributes(changes)
    except InvalidParameterValue as error:
        raise SqsFault("InvalidAttributeValue", error.sqs_message) from None
    return {}


@action
def add_permission(request: Request) -> dict[str, Any]:
    """Adds a statement (its Sid the Label) to the queue's stored Policy; nothing enforces it."""
    label = request.required("Label")
    accounts = request.required("AWSAccountIds")
    actions = request.required("Actions")
    queue = request.queue()
    arn = request.service.naming.arn(queue.name)
    _change_policy(queue, lambda policy: permissions.added(policy, label, accounts, actions, arn))
    return {}


@action
def remove_permission(request: Request) -> dict[str, Any]:
    label = request.required("Label")
    _change_policy(request.queue(), lambda policy: permissions.removed(policy, label))
    return {}


def _change_policy(queue: Queue, change: Callable[[str | None], str | None]) -> None:
    """Edits the stored Policy from its current text, as one step (see Queue.update_attributes)."""

    def changes(current: dict[str, Any]) -> dict[str, Any]:
        stored = current["sqs_metadata"]
        policy = change(stored.get("Policy"))
        return {"sqs_metadata": settings.merged_metadata(stored, {"Policy": policy or ""})}

    queue.update_attributes(changes)


@action
def purge_queue(request: Request) -> dict[str, Any]:
    queue = request.queue()
    with request.service.purging(queue):
        queue.purge()
    return {}


@action
def tag_queue(request: Request) -> dict[str, Any]:
    given = request.required("Tags")
    if not given:  # as SQS: an empty map is a missing one
        raise SqsFault("MissingParameter", missing_parameter("Tags"))

    queue = request.queue()

    def changes(current: dict[str, Any]) -> dict[str, Any]:
        tags = {**current["tags"], **given}
        if len(tags) > MAX_TAGS:
            raise SqsFault("InvalidParameterValue", f"Too many tags added for queue {queue.name}.")
        return {"tags": tags}

    queue.update_attributes(changes)
    return {}


@action
def untag_queue(request: Request) -> dict[str, Any]:
    removed = set(request.required("TagKeys"))
    if not removed:
        raise SqsFault(
            "InvalidParameterValue", "Tag keys must be between 1 and 128 characters in length."
        )
    request.queue().update_attributes(
        lambda current: {"tags": {k: v for k, v in current["tags"].items() if k not in removed}}
    )
    return {}


@action
def list_queue_tags(request: Request) -> dict[str, Any]:
    return {"Tags": request.queue().attributes["tags"] or None}


@action
def list_dead_letter_source_queues(request: Request) -> dict[str, Any]:
    target = request.queue().name
    return _page(request, request.service.sources_of(target), "queueUrls")


@action
def start_message_move_task(request: Request) -> dict[str, Any]:
    naming = request.service.naming
    source = naming.name_of_arn(request.required("SourceArn"), "SourceArn")
    destination_arn = request.params.get("DestinationArn")
    destination = None if destination_arn is None else naming.name_of_arn(destination_arn)
    rate = request.params.get("MaxNumberOfMessagesPerSecond")
    if rate is not None and not 1 <= rate <= 500:
        raise SqsFault("InvalidParameterValue", "MaxNumberOfMessagesPerSecond is from 1 to 500")
    queue = _existing(request, source)
    if not request.service.sources_of(source):
        raise SqsFault(
            "InvalidParameterValue", f"{source!r} is no queue's dead-letter queue: nothing to move"
        )
    if destination is not None:
        _existing(request, destination)
    task = request.service.tasks.start(queue, destination, rate)
    return {"TaskHandle": task.handle}


@action
def list_message_move_tasks(request: Request) -> dict[str, Any]:
    naming = request.service.naming
    source = naming.name_of_arn(request.required("SourceArn"), "SourceArn")
    _existing(request, source)
    results = []
    for task in request.service.tasks.listed(source, request.params.get("MaxResults")):
        results.append(
            {
                "TaskHandle": task.handle if task.status == "RUNNING" else None,
                "Status": task.status,
                "SourceArn": naming.arn(task.source),
                "DestinationArn": None
                if task.destination is None
                else naming.arn(task.destination),
                "MaxNumberOfMessagesPerSecond": task.rate,
                "ApproximateNumberOfMessagesMoved": task.moved,
                "ApproximateNumberOfMessagesToMove": task.to_move,
                "FailureReason": task.failure and request.service.redacted(task.failure)[:500],
                "StartedTimestamp": task.started_ms,
            }
        )
    return {"Results": results}


@action
def cancel_message_move_task(request: Request) -> dict[str, Any]:
    task = request.service.tasks.cancel(request.required("TaskHandle"))
    return {"ApproximateNumberOfMessagesMoved": task.moved}


def _existing(request: Request, name: str) -> Any:
    queue = request.service.find(name)
    if queue is None:
        raise SqsFault("ResourceNotFoundException", NO_QUEUE)
    return queue


def _check_dead_letter_target(request: Request, name: str, keywords: dict[str, Any]) -> None:
    """A dead-letter queue's RedriveAllowPolicy must let this queue send to it."""
    target = keywords.get("dead_letter_queue")
    if target is None:
        return
    dead_letters = request.service.find(target)
    if dead_letters is None:
        raise SqsFault("InvalidParameterValue", f"the dead-letter queue {target!r} does not exist")
    policy = dead_letters.attributes["redrive_allow_policy"]
    if not takes_dead_letters_from(policy, name):
        raise SqsFault(
            "InvalidParameterValue",
            f"the RedriveAllowPolicy of {target!r} does not let {name!r} use it as its dead-letter queue",
        )


def _page(request: Request, names: list[str], key: str) -> dict[str, Any]:
    """A page of queue URLs: all (up to 1000) without MaxResults, else MaxResults after NextToken."""
    limit = request.params.get("MaxResults")
    token = request.params.get("NextToken")
    if limit is None and token is None:
        return {key: [request.url(n) for n in names[:DEFAULT_LISTED]] or None}
    if limit is not None and not 1 <= limit <= DEFAULT_LISTED:
        raise SqsFault("InvalidParameterValue", f"MaxResults must be from 1 to {DEFAULT_LISTED}")
    after = _after(token) if token is not None else None
    rest = [n for n in names if after is None or n > after]
    page = rest[: limit or DEFAULT_LISTED]
    more = len(rest) > len(page)
    next_token = base64.urlsafe_b64encode(page[-1].encode()).decode() if more else None
    return {key: [request.url(n) for n in page] or None, "NextToken": next_token}


def _after(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError):
        raise SqsFault(
            "InvalidParameterValue", "NextToken is not one this endpoint issued"
        ) from None

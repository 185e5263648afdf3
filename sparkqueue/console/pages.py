"""What each console page shows, read through the public API (and the endpoint's Service, which
knows the move tasks and which broker serves a queue): plain values for the templates.

Nothing here formats HTML: the templates do, with every value escaped by Jinja2."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..endpoint.service import Service
from ..errors import QueueDoesNotExist, QueueError
from ..model import MessageEvent
from ..queue import Queue
from ..services.metrics import depth_history

PEEKED = 20  # messages a queue's page shows
BODY_PREVIEW = 300  # characters of a body in a table; the message's page shows it whole
CHART_HOURS = 24


@dataclass(frozen=True)
class QueueRow:
    """One line of the queues page."""

    name: str
    visible: int | None
    in_flight: int | None
    delayed: int | None
    oldest_age_seconds: float | None
    dead_letter_queue: str | None
    dead_letter_depth: int | None
    sources: tuple[str, ...]
    problem: str | None = None


def queue_rows(service: Service) -> list[QueueRow]:
    names = service.broker.list_queues()
    stats: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for name in names:
        try:
            stats[name] = open_queue(service, name).stats()
        except QueueError as error:  # deleted meanwhile, or a table only Spark can read
            problems[name] = error.message
    rows = []
    for name in names:
        record = service.broker.context.registry.get(name)
        dlq = record.attributes.dead_letter_queue if record is not None else None
        found = stats.get(name)
        rows.append(
            QueueRow(
                name=name,
                visible=found.visible if found else None,
                in_flight=found.in_flight if found else None,
                delayed=found.delayed if found else None,
                oldest_age_seconds=round(found.oldest_age_seconds, 1) if found else None,
                dead_letter_queue=dlq,
                dead_letter_depth=stats[dlq].visible if dlq in stats else None,
                sources=tuple(service.sources_of(name)),
                problem=problems.get(name),
            )
        )
    return rows


def queue_page(service: Service, name: str) -> dict[str, Any]:
    queue = open_queue(service, name)
    return {
        "name": name,
        "attributes": queue.attributes,
        "stats": queue.stats(),
        "messages": [shown(row) for row in queue.peek(PEEKED)],
        "sources": service.sources_of(name),
    }


def dead_letters_page(service: Service, name: str) -> dict[str, Any]:
    queue = open_queue(service, name)
    messages = [shown(row) for row in queue.peek(PEEKED)]
    for message in messages:
        message["why"] = _why(service, name, message["moved_from"])
    return {
        "name": name,
        "stats": queue.stats(),
        "messages": messages,
        "sources": service.sources_of(name),
        "tasks": service.tasks.listed(name, 10),
    }


def _why(service: Service, name: str, source: str | None) -> str:
    """Why a message is in this queue: its source's redrive policy names it (the redrive job moved
    it there when its receives ran out; its history has the count), or it was moved by request."""
    if source is None:
        return "sent here"
    record = service.broker.context.registry.get(source)
    if record is not None and record.attributes.dead_letter_queue == name:
        return f"ran out of receives in {source} (max {record.attributes.max_receive_count})"
    return f"moved from {source}"


def depth_points(service: Service, name: str) -> list[dict[str, Any]]:
    """The redrive job's depth readings of the queue over the last day, oldest first."""
    since = datetime.now(UTC) - timedelta(hours=CHART_HOURS)
    return depth_history(service.broker.context, name, since)


def message_page(service: Service, name: str, message_id: str) -> dict[str, Any]:
    events = service.broker.history(name, message_id)
    return {
        "name": name,
        "message_id": message_id,
        "events": [timeline_entry(event) for event in events],
    }


def timeline_entry(event: MessageEvent) -> dict[str, Any]:
    detail = {k: _text(v) for k, v in event.detail.items() if k != "queue"}
    return {
        "kind": event.kind,
        "at": _text(event.at),
        "version": event.version,
        "receive_count": event.receive_count,
        "queue": event.detail.get("queue"),
        "detail": detail,
    }


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """A peeked message for a table: its body cut to BODY_PREVIEW characters and each attribute
    as text (a Binary one as its size and base64, never decoded into the page)."""
    body = str(row["body"])
    types = row.get("attribute_types") or {}
    attributes = {
        name: _attribute(value, types.get(name, "String"))
        for name, value in (row.get("attributes") or {}).items()
    }
    return {
        "message_id": row["message_id"],
        "body": body[:BODY_PREVIEW],
        "cut": len(body) > BODY_PREVIEW,
        "attributes": attributes,
        "receive_count": row["receive_count"],
        "sent_at": _text(row["sent_at"]),
        "moved_from": row.get("moved_from"),
        "group_id": row.get("group_id"),
    }


def _attribute(value: str, data_type: str) -> str:
    if not data_type.startswith("Binary"):
        return f"{value} ({data_type})" if data_type != "String" else value
    try:
        size = len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        size = None
    return f"({data_type}, {size} bytes) {value}"


def open_queue(service: Service, name: str) -> Queue:
    """The queue, through the broker that serves it (QueueDoesNotExist if there is none)."""
    queue = service.find(name)
    if queue is None:
        raise QueueDoesNotExist(f"queue {name!r} does not exist")
    return queue


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    return value

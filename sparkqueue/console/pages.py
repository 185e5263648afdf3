"""What each console page shows, read through the public API (and the endpoint's Service, which
knows the move tasks and which broker serves a queue): plain values for the templates.

Nothing here formats HTML: the templates do, with every value escaped by Jinja2 and written for
people by formats.py's filters."""

from __future__ import annotations

import base64
import binascii
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..endpoint.service import Service
from ..errors import QueueDoesNotExist, QueueError
from ..model import MessageEvent, QueueStats
from ..queue import Queue
from ..services.metrics import depth_history
from .formats import size

PEEKED = 20  # messages a queue's page shows
BODY_PREVIEW = 300  # characters of a body shown in a table (a body may be 256 KiB)
CHART_HOURS = 24
STATS_THREADS = 4
MOVE_TASKS_SHOWN = 10


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
    """Every queue with its counts: one registry read, the counts read side by side (delta-rs
    works outside the GIL), so the page stays quick with many queues."""
    records = service.broker.context.registry.records(fresh=True)
    names = sorted(records)

    def counted(name: str) -> QueueStats | str:
        try:
            return open_queue(service, name).stats()
        except QueueError as error:  # deleted meanwhile, or a table only Spark can read
            return error.message

    with ThreadPoolExecutor(max_workers=STATS_THREADS) as pool:
        stats = dict(zip(names, pool.map(counted, names), strict=True))
    rows = []
    for name in names:
        dlq = records[name].attributes.dead_letter_queue
        found, dead = stats[name], stats.get(dlq or "")
        counts = found if isinstance(found, QueueStats) else None
        rows.append(
            QueueRow(
                name=name,
                visible=counts.visible if counts else None,
                in_flight=counts.in_flight if counts else None,
                delayed=counts.delayed if counts else None,
                oldest_age_seconds=counts.oldest_age_seconds if counts else None,
                dead_letter_queue=dlq,
                dead_letter_depth=dead.visible if isinstance(dead, QueueStats) else None,
                sources=tuple(n for n in names if records[n].attributes.dead_letter_queue == name),
                problem=None if counts else service.redacted(str(found)),
            )
        )
    return rows


def queue_page(service: Service, name: str) -> dict[str, Any]:
    queue = open_queue(service, name)
    return {
        "name": name,
        "attributes": queue.attributes,
        "stats": queue.stats(),
        "messages": [shown(row) for row in queue.peek(PEEKED, newest=True)],
        "newest": not queue.attributes["fifo"],  # a FIFO queue's peek follows its groups' order
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
        "tasks": move_tasks(service, name),
    }


def move_tasks(service: Service, name: str) -> list[dict[str, Any]]:
    """The queue's move tasks, newest first, each failure said without the server's storage."""
    return [
        {**vars(task), "failure": task.failure and service.redacted(task.failure)[:500]}
        for task in service.tasks.listed(name, MOVE_TASKS_SHOWN)
    ]


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
    detail = {k: v for k, v in event.detail.items() if k != "queue"}
    return {
        "kind": event.kind,
        "at": event.at,
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
        "sent_at": row["sent_at"],
        "moved_from": row.get("moved_from"),
        "group_id": row.get("group_id"),
    }


def _attribute(value: str, data_type: str) -> str:
    if not data_type.startswith("Binary"):
        return f"{value} ({data_type})" if data_type != "String" else value
    try:
        decoded = size(len(base64.b64decode(value, validate=True)))
    except (binascii.Error, ValueError):
        decoded = "not base64"
    return f"({data_type}, {decoded}) {value}"


def open_queue(service: Service, name: str) -> Queue:
    """The queue, through the broker that serves it (QueueDoesNotExist if there is none)."""
    queue = service.find(name)
    if queue is None:
        raise QueueDoesNotExist(f"queue {name!r} does not exist")
    return queue

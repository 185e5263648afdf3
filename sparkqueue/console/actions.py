"""What the console's forms do, each through the public API, whose checks say what was wrong
(a `QueueError` the console shows). A form's fields are text; each becomes the API's type here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..endpoint.faults import SqsFault
from ..endpoint.service import Service
from ..errors import InvalidParameterValue, UnsupportedOperation
from . import pages
from .formats import count

Form = dict[str, list[str]]
EDITABLE = (
    "visibility_timeout",
    "delay_seconds",
    "retention_seconds",
    "max_message_bytes",
    "receive_wait_time_seconds",
    "dead_letter_queue",
    "max_receive_count",
)
MAX_RECEIVE = 10


@dataclass(frozen=True)
class Done:
    """A change made: a note for the next page and where to go (the path under /console/), or a
    page to show at once (`page`: template and values, e.g. the messages a receive handed out)."""

    note: str = ""
    go_to: tuple[str, ...] = ()
    page: tuple[str, dict[str, Any]] | None = None


def create(service: Service, form: Form) -> Done:
    name = _one(form, "name")
    options: dict[str, Any] = {
        key: _number(form, key)
        for key in ("visibility_timeout", "max_receive_count")
        if _one(form, key)
    }
    if _one(form, "dead_letter_queue"):
        options["dead_letter_queue"] = _one(form, "dead_letter_queue")
    if name.endswith(".fifo"):  # as the SQS console: the name says the type
        options.update(fifo=True, content_based_deduplication=True)
    service.broker.create_queue(name, **options)
    return Done(f"created {name}", ("queues", name))


def redrive(service: Service, form: Form) -> Done:
    """One pass now, on the endpoint's own broker (the native pass where it has the native
    engine: milliseconds, no JVM started by a click)."""
    report = service.broker.redrive()
    return Done(
        f"redrive pass: {count(report.moved_to_dead_letter)} moved to dead-letter queues,"
        f" {count(report.released)} released, {count(report.expired_by_retention)} expired"
    )


def set_attributes(service: Service, form: Form, name: str) -> Done:
    queue = pages.open_queue(service, name)
    current = queue.attributes
    changes: dict[str, Any] = {}
    for key in EDITABLE:
        if key not in form:
            continue
        text = _one(form, key)
        value: Any = (
            None if not text else text if key == "dead_letter_queue" else _number(form, key)
        )
        if value != current.get(key):
            changes[key] = value
    if changes:
        queue.set_attributes(**changes)
    return Done(f"saved {', '.join(sorted(changes)) or 'no change'}", ("queues", name))


def send(service: Service, form: Form, name: str) -> Done:
    queue = pages.open_queue(service, name)
    attributes = {}
    for line in _one(form, "attributes").splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep:
                raise InvalidParameterValue(f"attributes are name=value lines; got {line[:40]!r}")
            attributes[key.strip()] = value.strip()
    options: dict[str, Any] = {"attributes": attributes or None}
    if _one(form, "group_id"):
        options["group_id"] = _one(form, "group_id")
    if _one(form, "delay_seconds"):
        options["delay_seconds"] = _number(form, "delay_seconds")
    message_id = queue.send(_one(form, "body"), **options)
    return Done(f"sent {message_id}", ("queues", name))


def receive(service: Service, form: Form, name: str) -> Done:
    """Receives at once and shows what came, with each one's delete (its handle is in the page,
    which only this session sees)."""
    queue = pages.open_queue(service, name)
    count = _number(form, "max_messages") if _one(form, "max_messages") else 1
    timeout = _number(form, "visibility_timeout") if _one(form, "visibility_timeout") else None
    messages = queue.receive(min(count, MAX_RECEIVE), visibility_timeout=timeout)
    received = [
        {**pages.shown(_fields(m)), "receipt_handle": m.receipt_handle, "body": m.body}
        for m in messages
    ]
    return Done(
        page=(
            "received.html",
            {"title": f"Received from {name}", "name": name, "received": received},
        )
    )


def delete(service: Service, form: Form, name: str) -> Done:
    pages.open_queue(service, name).delete(_one(form, "receipt_handle"))
    return Done("deleted the message", ("queues", name))


def purge(service: Service, form: Form, name: str) -> Done:
    if _one(form, "confirm") != name:
        raise InvalidParameterValue(f"purging needs the confirmation naming {name!r}")
    purged = pages.open_queue(service, name).purge()
    return Done(f"purged {count(purged)} message(s) from {name}", ("queues", name))


def move_back(service: Service, form: Form, name: str) -> Done:
    """One message (its row's button), the selected ones, or all of them as a move task whose
    progress the page shows."""
    queue = pages.open_queue(service, name)
    if _one(form, "all"):
        try:
            service.tasks.start(queue, None, None)
        except SqsFault as fault:  # one is running already, or the endpoint is closing
            raise UnsupportedOperation(fault.message) from None
        return Done(f"started moving the messages of {name} back", ("queues", name, "dead-letters"))
    ids = [_one(form, "one")] if _one(form, "one") else form.get("message_id", [])
    if not ids:
        raise InvalidParameterValue("select the messages to move back first")
    moved = queue.start_message_move(message_ids=ids)
    return Done(f"moved {count(moved)} message(s) back", ("queues", name, "dead-letters"))


ON_QUEUE = {
    "attributes": set_attributes,
    "send": send,
    "receive": receive,
    "delete": delete,
    "purge": purge,
    "move-back": move_back,
}


def _one(form: Form, key: str) -> str:
    return (form.get(key) or [""])[0].strip() if key != "body" else (form.get(key) or [""])[0]


def _number(form: Form, key: str) -> int:
    text = _one(form, key)
    if not re.fullmatch(r"-?[0-9]{1,12}", text):
        raise InvalidParameterValue(f"{key.replace('_', ' ')} must be a whole number, got {text!r}")
    return int(text)


def _fields(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message.__dataclass_fields__}

"""Commands on queues and their messages: list, create, delete, attributes, send, peek, receive,
purge, stats."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live

from ..errors import InvalidParameterValue
from . import render
from .app import CatalogOption, JsonOption, RootOption, command, open_broker, open_queue

NameArgument = Annotated[str, typer.Argument(help="The queue's name.", show_default=False)]
LINE_FIELDS = {"body", "attributes", "delay_seconds", "group_id", "deduplication_id"}


def overview(queue: Any) -> dict[str, Any]:
    """One queue's row in `queues`: its main attributes and live counts."""
    name = queue.name
    attributes = queue.attributes
    stats = queue.stats()
    return {
        "name": name,
        "fifo": attributes["fifo"],
        "visible": stats.visible,
        "in_flight": stats.in_flight,
        "delayed": stats.delayed,
        "oldest_age_seconds": round(stats.oldest_age_seconds, 1),
        "visibility_timeout": attributes["visibility_timeout"],
        "dead_letter_queue": attributes["dead_letter_queue"],
    }


@command
def queues(
    prefix: Annotated[str, typer.Option(help="Only names starting with this.")] = "",
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every queue with its attributes and live counts."""
    broker = open_broker(root, catalog)
    names = broker.list_queues(prefix)
    ctx = broker.context
    if broker.spark is None and any(ctx.spark_only(ctx.record(name)) for name in names):
        broker = open_broker(root, catalog, spark=True)  # row-tracking FIFO counts are Spark's
    rows = [overview(broker.get_queue(name)) for name in names]
    render.show(rows, as_json=as_json, title="queues")


@command
def create(
    name: NameArgument,
    fifo: Annotated[
        bool, typer.Option("--fifo", help="A FIFO queue (its name ends .fifo).")
    ] = False,
    visibility_timeout: Annotated[int | None, typer.Option(help="Seconds.")] = None,
    delay_seconds: Annotated[int | None, typer.Option(help="Seconds.")] = None,
    dead_letter_queue: Annotated[str | None, typer.Option(help="Where exhausted go.")] = None,
    max_receive_count: Annotated[int | None, typer.Option(help="Receives before that.")] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Creates a queue (an existing one with the same attributes is kept, as in SQS)."""
    given = {
        "visibility_timeout": visibility_timeout,
        "delay_seconds": delay_seconds,
        "dead_letter_queue": dead_letter_queue,
        "max_receive_count": max_receive_count,
    }
    broker = open_broker(root, catalog)
    queue = broker.create_queue(
        name, fifo=fifo, **{key: value for key, value in given.items() if value is not None}
    )
    render.show({"name": queue.name, **queue.attributes}, as_json=as_json, title="created")


@command
def delete(
    name: NameArgument,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deletes a queue with its messages."""
    open_broker(root, catalog).delete_queue(name)
    render.show({"deleted": name}, as_json=as_json)


@command
def attributes(
    name: NameArgument,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE (repeatable); VALUE 'none' clears.", metavar="KV"),
    ] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Shows a queue's attributes, or changes some with --set."""
    changes = dict(parse_assignment(text) for text in set_ or [])
    queue = open_queue(root, catalog, name)
    if changes:
        queue.set_attributes(**changes)
    render.show(queue.attributes, as_json=as_json, title=name)


def parse_assignment(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` with VALUE read as JSON where it is JSON (numbers, true/false), 'none' as None."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise InvalidParameterValue(f"--set takes KEY=VALUE, got {text!r}")
    if raw.lower() in ("none", "null"):
        return key, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value if isinstance(value, bool | int | float) else raw


@command
def send(
    name: NameArgument,
    body: Annotated[str | None, typer.Argument(help="The message body.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="One message per line.")] = None,
    json_lines: Annotated[
        bool, typer.Option("--json-lines", help=f"Each line an object with {sorted(LINE_FIELDS)}.")
    ] = False,
    group_id: Annotated[str | None, typer.Option(help="FIFO message group.")] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Sends the body, else each line of --file, else each line of stdin: one commit in all."""
    if body is not None:
        lines = [body]
    elif file is not None:
        lines = file.read_text(encoding="utf-8").splitlines()
    else:
        lines = sys.stdin.read().splitlines()
    entries = [entry(line, number, json_lines, group_id) for number, line in enumerate(lines, 1)]
    if not entries:
        raise InvalidParameterValue("nothing to send: give a body, --file, or lines on stdin")
    queue = open_queue(root, catalog, name)
    with render.working(f"sending {len(entries):,} message(s) to {name}", as_json=as_json):
        ids = queue.send_batch(entries)
    render.show({"sent": len(ids), "message_ids": ids}, as_json=as_json)


def entry(line: str, number: int, json_lines: bool, group_id: str | None) -> dict[str, Any]:
    """One line as a `send_batch` entry; a malformed line is an error naming it, before any send."""
    if not json_lines:
        return {"body": line, "group_id": group_id} if group_id else {"body": line}
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise InvalidParameterValue(f"line {number} is not JSON: {error.msg}") from None
    if not isinstance(value, dict) or "body" not in value:
        raise InvalidParameterValue(f"line {number}: expected an object with a 'body'")
    unknown = sorted(set(value) - LINE_FIELDS)
    if unknown:
        raise InvalidParameterValue(
            f"line {number}: unknown field(s) {unknown}; allowed: {sorted(LINE_FIELDS)}"
        )
    return {"group_id": group_id, **value} if group_id else value


@command
def peek(
    name: NameArgument,
    n: Annotated[int, typer.Option("-n", help="At most this many.")] = 10,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Visible messages, oldest first, without receiving them."""
    render.show(peeked(open_queue(root, catalog, name), n), as_json=as_json, title=name)


def peeked(queue: Any, n: int) -> list[dict[str, Any]]:
    """Up to `n` visible messages as rows, oldest first, read without claiming them."""
    columns = ["message_id", "body", "attributes", "receive_count", "sent_at", "group_id"]
    return [{c: row[c] for c in columns} for row in queue.peek(n)]


@command
def receive(
    name: NameArgument,
    n: Annotated[int, typer.Option("-n", help="At most this many.")] = 1,
    delete_: Annotated[bool, typer.Option("--delete", help="Delete them at once.")] = False,
    visibility_timeout: Annotated[int | None, typer.Option(help="Seconds.")] = None,
    wait: Annotated[int, typer.Option("--wait", help="Long-poll this many seconds.")] = 0,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Receives messages (hidden for their visibility timeout unless --delete)."""
    queue = open_queue(root, catalog, name)
    messages = queue.receive(n, visibility_timeout=visibility_timeout, wait_time_seconds=wait)
    if delete_ and messages:
        queue.delete_batch([message.receipt_handle for message in messages])
    render.show(messages, as_json=as_json, title=name)


@command
def purge(
    name: NameArgument,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deletes every message of a queue, in flight or not."""
    queue = open_queue(root, catalog, name)
    with render.working(f"purging {name}", as_json=as_json):
        purged = queue.purge()
    render.show({"purged": purged}, as_json=as_json)


@command
def stats(
    name: NameArgument,
    watch: Annotated[
        float | None, typer.Option("--watch", help="Refresh every this many seconds.")
    ] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """A queue's counts, as SQS's Approximate* metrics; --watch refreshes them until Ctrl-C."""
    queue = open_queue(root, catalog, name)
    if watch is None or as_json:
        render.show(queue.stats(), as_json=as_json, title=name)
        return
    if watch <= 0:
        raise InvalidParameterValue(f"--watch takes seconds above 0, got {watch}")
    with Live(console=render.out, auto_refresh=False) as live:
        try:
            while True:
                rows = [{"name": k, "value": v} for k, v in render.plain(queue.stats()).items()]
                live.update(render.rows_table(rows, f"{name} (every {watch:g} s)"), refresh=True)
                time.sleep(watch)  # the refresh period the user asked for
        except KeyboardInterrupt:
            pass

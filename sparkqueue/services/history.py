"""`Queue.history`: one message's events across the queues it passed through.

A message keeps its id when the redrive job moves it to a dead-letter queue or a move brings it
back, so its life is the union of what each queue's table recorded (engine/messages/history.py), followed
from the queue asked (and its dead-letter queue) along every move out or in."""

from __future__ import annotations

from ..engine.context import QueueContext
from ..engine.messages.history import events
from ..errors import UnsupportedOperation
from ..model import MessageEvent
from ..rules.checks import check_message_id

# Events of one instant in two tables, in the order they happen (a move marks, then copies).
_ORDER = {kind: i for i, kind in enumerate(("sent", "moved_out", "moved_in"))}


def history(ctx: QueueContext, name: str, message_id: object) -> list[MessageEvent]:
    """The events of `message_id`, oldest first, starting from queue `name` and its dead-letter
    queue and following its moves; [] if none of them ever held it within the kept log."""
    message_id = check_message_id(message_id)
    record = ctx.record(name, fresh=True)
    if ctx.native is None:
        raise UnsupportedOperation(
            "a message's history is read from the tables' Delta log by the native engine, which"
            f" this broker does not have ({ctx.tables.layout}); open the root with"
            " Broker(None, root) (reading the log changes nothing)"
        )
    todo = [name, record.attributes.dead_letter_queue]
    seen: set[str] = set()
    found: list[MessageEvent] = []
    while todo:
        queue = todo.pop(0)
        if queue is None or queue in seen:
            continue
        seen.add(queue)
        current = ctx.registry.get(queue, fresh=True)
        if current is None:  # deleted since: what it held is gone with it
            continue
        states = ctx.native.row_states(current.location, message_id)
        mine = list(events(queue, states, current.attributes))
        found.extend(mine)
        todo.extend(str(e.detail[k]) for e in mine for k in ("to", "from") if k in e.detail)
    return sorted(found, key=lambda e: (e.at, _ORDER.get(e.kind, len(_ORDER))))

"""A message's history: the events one queue table's versions of its row add up to.

The rule is written once, on two successive states of the row (store/native_history.py reads
them): what changed between them is what happened. A receive raises the receive count, a change
of visibility moves `visible_at` under the same handle, the redrive job's release drops the
handle, a move marks the row (`moving:<token>:<queue>`, moves/steps.py) before it leaves, and a row that
leaves otherwise expired if its retention had run out by the commit's time and no consumer held it
(past_retention in conditions.py; the redrive job's clock is a wall clock, as the commit's), else
was deleted (by its consumer, or a purge)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from ...attributes import QueueAttributes
from ...model import MessageEvent
from ...rules.handles import MOVE_MARKER_PREFIX
from ...store.native_history import RowState
from ..conditions import TOMBSTONE_SHARD


def events(
    queue: str, states: Iterable[RowState], attrs: QueueAttributes
) -> Iterator[MessageEvent]:
    """The events of one message in one queue's table, oldest first."""
    before: dict[str, Any] | None = None
    for state in states:
        row = _message(state.row)
        if state.kept and before is None:
            yield from _kept(queue, state, row, attrs)
        else:
            yield from _change(queue, state, before, row, attrs)
        before = row


def _message(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row while it is a message: a FIFO tombstone is what a deleted message leaves."""
    return None if row is None or row.get("shard") == TOMBSTONE_SHARD else row


def _event(
    kind: str, queue: str, state: RowState, row: dict[str, Any], **detail: Any
) -> MessageEvent:
    detail = {"queue": queue, **{k: v for k, v in detail.items() if v is not None}}
    return MessageEvent(kind, state.at, state.version, int(row["receive_count"]), detail)


def _kept(
    queue: str, state: RowState, row: dict[str, Any] | None, attrs: QueueAttributes
) -> Iterator[MessageEvent]:
    """The first state of the row that can be read, the commits or files before it gone: its
    arrival, its last receive and a move under way, from its own columns (`summarised`)."""
    if row is None:
        return
    arrival = dataclasses.replace(state, at=row["sent_at"])
    unreceived = {**row, "receive_count": 0}
    if row["moved_from"]:
        yield _event(
            "moved_in",
            queue,
            arrival,
            unreceived,
            summarised=True,
            **{"from": row["moved_from"]},
        )
    else:
        yield _event("sent", queue, arrival, unreceived, summarised=True)
    if row["receive_count"] and row["handle_issued_at"] is not None:
        last = dataclasses.replace(state, at=row["handle_issued_at"])
        yield _event("received", queue, last, row, visible_until=row["visible_at"], summarised=True)
    if _move_destination(row) is not None:
        yield _moved_out(queue, state, row, attrs)


def _change(
    queue: str,
    state: RowState,
    before: dict[str, Any] | None,
    row: dict[str, Any] | None,
    attrs: QueueAttributes,
) -> Iterator[MessageEvent]:
    if before is None and row is not None:
        if row["moved_from"]:
            yield _event("moved_in", queue, state, row, **{"from": row["moved_from"]})
        else:
            yield _event("sent", queue, state, row, visible_at=row["visible_at"])
    elif before is not None and row is None:
        yield from _departure(queue, state, before, attrs)
    elif before is not None and row is not None:
        yield from _update(queue, state, before, row, attrs)


def _departure(
    queue: str, state: RowState, before: dict[str, Any], attrs: QueueAttributes
) -> Iterator[MessageEvent]:
    """A row gone: moved (reported when marked), expired, or deleted. Expired: its retention had
    run out by the commit's time and no consumer held it (a consumer's delete needs its current
    handle; the redrive job releases expired receives before it removes what retention ended)."""
    if _move_destination(before) is not None:
        return  # `moved_out` when it was marked; this is the move's last step
    past = state.at >= before["sent_at"] + timedelta(seconds=attrs.retention_seconds)
    if past and before["receipt_handle"] is None:
        yield _event("expired", queue, state, before, sent_at=before["sent_at"])
    else:
        yield _event("deleted", queue, state, before)


def _update(
    queue: str,
    state: RowState,
    before: dict[str, Any],
    row: dict[str, Any],
    attrs: QueueAttributes,
) -> Iterator[MessageEvent]:
    if _move_destination(row) is not None:
        if _move_destination(before) is None:
            yield _moved_out(queue, state, row, attrs)
        return
    if row["receive_count"] > before["receive_count"]:
        yield _event("received", queue, state, row, visible_until=row["visible_at"])
    elif row["receipt_handle"] is None and before["receipt_handle"] is not None:
        yield _event("released", queue, state, row, visible_at=row["visible_at"])
    elif row["visible_at"] != before["visible_at"]:
        moved_by = (row["visible_at"] - before["visible_at"]).total_seconds()
        yield _event(
            "visibility_changed",
            queue,
            state,
            row,
            visible_until=row["visible_at"],
            moved_by_seconds=moved_by,
        )


def _moved_out(
    queue: str, state: RowState, row: dict[str, Any], attrs: QueueAttributes
) -> MessageEvent:
    """The move's first step, marking the row for its destination: it is then on its way (the
    copy and the removal follow, finished by the next redrive pass if not by this one)."""
    destination = _move_destination(row)
    exhausted = (
        destination == attrs.dead_letter_queue
        and attrs.max_receive_count is not None
        and row["receive_count"] >= attrs.max_receive_count
    )
    reason = "max_receive_count reached" if exhausted else "moved by request"
    return _event("moved_out", queue, state, row, to=destination, reason=reason)


def _move_destination(row: dict[str, Any]) -> str | None:
    handle = row["receipt_handle"] or ""
    if not handle.startswith(MOVE_MARKER_PREFIX):
        return None
    return handle.removeprefix(MOVE_MARKER_PREFIX).split(":", 1)[1]

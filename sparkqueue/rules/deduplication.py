"""FIFO deduplication judged over rows at hand: which sends are duplicates, and of what.

The rule (SQS's): a send is accepted when no accepted send with its deduplication id came in the
five minutes before it; a later send within that window is a duplicate of the accepted one,
acknowledged with its id and never delivered. Each send replays its id's history in sequence
order (ties broken by message id) to find the accepted send it falls under. Deduplication judges
sends only: a row a move copied in keeps its original send time and id but takes a new place in
the sequence, so it is never a duplicate and never makes a later send one.

Scope: on a queue whose DeduplicationScope is messageGroup (SQS's high-throughput FIFO), an id
counts within its message group only. Such a send's row keeps its group with its id, as
`<group>\x1f<id>` (the unit separator, which neither may hold), and the rule compares the rows'
keys: each row carries the scope it was sent under, so a change of scope rules the sends after it
and re-judges none before it (no answer given is ever taken back). Every read hands the id out
as it was given (`as_given`).

Both engines judge with this code: each reads the rows that share a deduplication id from the
same snapshot as the rows it then reads or changes (engine/fifo/operations.py's FifoSnapshot), and
every send's answer comes from it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..limits import DEDUPLICATION_WINDOW
from ..model import SentMessage
from .expr import Field, Named, after_last, col

SCOPE_SEPARATOR = "\x1f"

# What the rule reads of each row.
DEDUPLICATION_COLUMNS = ("message_id", "deduplication_id", "sequence_number", "sent_at",
                         "moved_from")  # fmt: skip


def deduplication_key(deduplication_id: str, group_id: str, *, in_group: bool) -> str:
    """What a FIFO send's row keeps in `deduplication_id`: the id, or within its group."""
    return f"{group_id}{SCOPE_SEPARATOR}{deduplication_id}" if in_group else deduplication_id


def given_id(key: str | None) -> str | None:
    """The deduplication id as its sender gave it, from a row's key."""
    return None if key is None else key.rpartition(SCOPE_SEPARATOR)[2]


def as_given(fields: Sequence[str]) -> tuple[Field, ...]:
    """A read's fields as handed out: the deduplication id as given (`given_id`, in either
    engine's reads)."""
    given = Named("deduplication_id", after_last(col("deduplication_id"), SCOPE_SEPARATOR))
    return tuple(given if name == "deduplication_id" else name for name in fields)


def accepted_originals(history: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """For each row (`message_id`, `deduplication_id`, `sequence_number`, `sent_at`,
    `moved_from`): the accepted send it counts as (its own id when it is accepted), or None
    for a row a move copied in."""
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    found: dict[str, str | None] = {}
    for row in history:
        if row["moved_from"] is not None or row["deduplication_id"] is None:
            found[row["message_id"]] = None if row["moved_from"] is not None else row["message_id"]
        else:
            by_id.setdefault(row["deduplication_id"], []).append(row)
    for rows in by_id.values():
        accepted_at: datetime | None = None
        accepted = ""
        for row in sorted(rows, key=lambda r: (r["sequence_number"], r["message_id"])):
            if accepted_at is None or row["sent_at"] - accepted_at >= DEDUPLICATION_WINDOW:
                accepted_at, accepted = row["sent_at"], row["message_id"]
            found[row["message_id"]] = accepted
    return found


def duplicates(history: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of the rows that are duplicates: never delivered, never counted."""
    return [
        message_id
        for message_id, original in accepted_originals(history).items()
        if original is not None and original != message_id
    ]


def sent_answers(
    sent: Mapping[str, str], history: Iterable[Mapping[str, Any]]
) -> dict[str, SentMessage]:
    """What each just-sent message id (mapped to its deduplication id) answers: the accepted
    message it counts as (itself, or the earlier one it repeats) and that one's sequence number.
    `history` holds the rows with those deduplication ids, read after the send committed."""
    rows = sorted(history, key=lambda r: (r["sequence_number"], r["message_id"]))
    found = accepted_originals(rows)
    # A duplicate the redrive job already dropped: the id's latest accepted message stands for it.
    latest = {
        row["deduplication_id"]: found[row["message_id"]]
        for row in rows
        if found[row["message_id"]] is not None
    }
    sequence = {row["message_id"]: row["sequence_number"] for row in rows}
    answers = {}
    for message_id, deduplication_id in sent.items():
        accepted = found.get(message_id) or latest.get(deduplication_id, message_id)
        answers[message_id] = SentMessage(accepted, sequence.get(accepted))
    return answers

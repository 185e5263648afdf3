"""A shared round on a standard queue: several callers' deletes, visibility changes and claims in
one UPDATE, one commit.

The statement is the worker loop's exchange (exchange.py) widened to many callers: on literal
shards and ids, rows still holding a handle being deleted become tombstones (as the exchange
leaves them; the redrive job drops them), rows still holding a handle being extended get their
new visible_at, and candidates still as read are claimed, each with its caller's visibility
timeout. When the commit's count says every row was done, every caller's operation applied;
otherwise the table is read once per kind to tell each caller what happened to its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import reduce
from itertools import islice
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..errors import OverLimit
from ..rules import handles
from ..store.counts import Counts
from ..store.dml import in_list
from ..store.registry import QueueRecord
from .acknowledge import present
from .asks import Answer, Ask
from .claim import candidates, claim_values, count_in_flight, message_of, still_claimable
from .context import QueueContext
from .exchange import by_kind, holding
from .fifo import tombstone_values
from .inflight import gauge
from .visibility import diagnose, extension


def run(ctx: QueueContext, record: QueueRecord, asks: list[Ask]) -> list[Answer]:
    """Every ask's answer, from one transaction (retried whole on conflicts)."""
    if record.attributes.fifo:
        raise ValueError("FIFO rounds carry one ask: a FIFO claim fails or succeeds whole")
    retire = {ref.message_id: ref for ask in asks for ref in ask.retire}
    changes = {ref.handle: (ref, seconds) for ask in asks for ref, seconds in ask.changes}
    wanted = sum(ask.wanted for ask in asks)
    in_flight = gauge(record.location, fifo=False)

    def attempt() -> list[Answer]:
        now = ctx.now()
        granted, limit = 0, None
        if wanted:
            try:
                granted = in_flight.reserve(
                    wanted, lambda: count_in_flight(ctx, record, now), f"queue {record.name!r}"
                )
            except OverLimit as error:
                limit = error
        won: set[str] = set()
        try:
            busy = set(retire) | {ref.message_id for ref, _ in changes.values()}
            found = [
                row
                for row in (candidates(ctx, record, now, granted) if granted else [])
                if row.message_id not in busy
            ]
            shares = _shares(found, [ask.wanted for ask in asks], granted)
            token = handles.new_token()
            issued = {
                row.message_id: handles.issue(record.secret, token, row.shard, row.message_id)
                for row in found
            }
            timeouts = {
                row.message_id: ask.timeout
                for ask, share in zip(asks, shares, strict=True)
                for row in share
            }
            kinds: list[tuple[Column, dict[str, Column]]] = []
            if retire:
                retiring = in_list("message_id", list(retire)) & in_list(
                    "receipt_handle", [ref.handle for ref in retire.values()]
                )
                kinds.append((retiring, tombstone_values()))
            targets: dict[str, datetime] = {}
            if changes:
                extending, extended, targets = extension(list(changes.values()), now)
                kinds.append((extending, extended))
            if found:
                claiming = in_list("message_id", list(issued)) & still_claimable(
                    found, now, record.attributes
                )
                kinds.append((claiming, _claiming(token, record, now, timeouts)))
            retired_shards = [ref.shard for ref in retire.values()]
            shards = retired_shards + [ref.shard for ref, _ in changes.values()]
            shards += [row.shard for row in found]
            counts = (
                ctx.storage.change(
                    record.location,
                    in_list("shard", shards) & reduce(Column.__or__, [rows for rows, _ in kinds]),
                    ("shard", "message_id"),
                    by_kind(kinds),
                )
                if kinds
                else Counts(known=True)
            )
            if counts.all_of(len(retire) + len(changes) + len(found)):
                won, superseded = set(issued), set()
                changed = {handle: None for handle in changes}
            else:  # someone else came first somewhere: the table says who holds what
                won = set(holding(ctx, record, issued)) if found else set()
                ids = list(retire)
                superseded = present(ctx, record, retired_shards, ids) if ids else set()
                changed = (
                    diagnose(ctx, record, list(changes.values()), now, targets) if changes else {}
                )
        finally:
            if granted:
                in_flight.settle(granted, len(won))
        answers = []
        for ask, share in zip(asks, shares, strict=True):
            claimed = [message_of(row, issued[row.message_id], now) for row in share]
            answers.append(
                Answer(
                    claimed=[m for m in claimed if m.message_id in won],
                    superseded=frozenset(r.message_id for r in ask.retire) & superseded,
                    changed={ref.handle: changed[ref.handle] for ref, _ in ask.changes},
                    error=limit if ask.wanted and limit is not None else None,
                )
            )
        return answers

    return ctx.storage.transact(record.location, attempt, f"a shared round on {record.name!r}")


def _shares(found: list[Any], wants: list[int], granted: int) -> list[list[Any]]:
    """The candidates dealt to the callers in the order they asked, each up to what it wants,
    all together up to what the in-flight limit granted."""
    rows: Iterator[Any] = iter(found[:granted])
    shares = []
    for want in wants:
        shares.append(list(islice(rows, want)))
    return shares


def _claiming(
    token: str, record: QueueRecord, now: datetime, timeouts: dict[str, int]
) -> dict[str, Column]:
    """What a claimed row is set to: the new handle, and its own caller's visibility timeout."""
    by_timeout: dict[int, list[str]] = {}
    for message_id, seconds in timeouts.items():
        by_timeout.setdefault(seconds, []).append(message_id)
    visible_at = F.lit(None).cast("timestamp")  # never kept: every claimed row has a timeout
    for seconds, ids in by_timeout.items():
        at = F.lit(now + timedelta(seconds=seconds))
        visible_at = (
            at
            if len(by_timeout) == 1
            else F.when(in_list("message_id", ids), at).otherwise(visible_at)
        )
    return {
        **claim_values(now, now),
        "visible_at": visible_at,
        "receipt_handle": handles.issue_column(
            record.secret, token, F.col("shard"), F.col("message_id")
        ),
    }

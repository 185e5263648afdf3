"""A shared round on a standard queue: several callers' deletes, visibility changes and claims in
one statement, one commit (rounds/statement.py).

The round reads candidates for every caller's claim at once and deals them out in the order the
callers asked, each with its own visibility timeout. When the commit's counts say every row was
done, every caller's operation applied; otherwise the table is read once per kind to tell each
caller what happened to its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from itertools import islice

from ...errors import OverLimit
from ...rules import handles
from ...store.registry import QueueRecord
from ...store.statements import Row
from ...store.transactions import is_commit_conflict
from ..context import QueueContext
from ..messages.acknowledge import present
from ..messages.claim import candidates, count_in_flight, message_of
from ..messages.visibility import diagnose
from .requests import Answer, Ask
from .statement import RoundChanges, holding

log = logging.getLogger(__name__)


def run(ctx: QueueContext, record: QueueRecord, asks: list[Ask]) -> list[Answer]:
    """Every ask's answer, from one transaction (retried whole on conflicts)."""
    if record.attributes.fifo:
        raise ValueError("FIFO rounds carry one ask: a FIFO claim fails or succeeds whole")
    # Every handle counts: a stale one beside the current one for the same message must not hide
    # it (rounds._fitting keeps two callers' asks on one message apart; this is within one ask).
    retire = list({ref.handle: ref for ask in asks for ref in ask.retire}.values())
    changes = {ref.handle: (ref, seconds) for ask in asks for ref, seconds in ask.changes}
    wanted = sum(ask.wanted for ask in asks)
    in_flight = ctx.in_flight.of(record.location, fifo=False)

    missed: list[bool] = []  # whether the last attempt claimed spares some of which were gone

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
            busy = {ref.message_id for ref in retire} | {
                ref.message_id for ref, _ in changes.values()
            }
            # Rows by item, not attribute, here and below: a round may carry thousands.
            read = candidates(ctx, record, now, granted) if granted else []
            found = [row for row in read if row["message_id"] not in busy]
            shares = _shares(found, [ask.wanted for ask in asks], granted)
            token = (asks[0].token if len(asks) == 1 else None) or handles.new_token()
            issued = {
                row["message_id"]: handles.issue(
                    record.secret, token, row["shard"], row["message_id"]
                )
                for row in found
            }
            began = ctx.now()
            claimed_until: dict[str, datetime] = {}
            for ask, share in zip(asks, shares, strict=True):
                until = ctx.handouts.until(record.location, began, ask.timeout)
                claimed_until.update(dict.fromkeys((row["message_id"] for row in share), until))
            changing = list(changes.values())
            writes = RoundChanges(
                ctx,
                record,
                now,
                retire=retire,
                changes=changing,
                found=found,
                issued=issued,
                claimed_until=claimed_until,
                token=token,
            )
            try:
                committed = _commit(writes)
            except Exception as error:
                # This very commit, landed with its answer lost (see messages/claim.py), when
                # rows hold the handles it issued: the table then says what each caller got.
                if not (found and is_commit_conflict(error) and holding(ctx, record, issued)):
                    raise
                committed = False
            if found:
                ctx.handouts.took(record.location, began, ctx.now())
            if committed:
                won, superseded = set(issued), set()
                changed = {handle: None for handle in changes}
            else:  # someone else came first somewhere: the table says who holds what
                won = set(holding(ctx, record, issued)) if found else set()
                ids = [ref.message_id for ref in retire]
                shards = [ref.shard for ref in retire]
                superseded = present(ctx, record, shards, ids) if ids else set()
                changed = diagnose(ctx, record, changing, now) if changes else {}
        except Exception:
            ctx.spares.drop(record.location)  # a retry reads: these may be what it met
            raise
        finally:
            if granted:
                in_flight.settle(granted, len(won))
        # A spare this round also deletes or changes is in flight: missed like a taken one.
        missed[:] = [ctx.spares.settle(record.location, read, len(won))]
        answers = []
        for ask, share in zip(asks, shares, strict=True):
            claimed = [message_of(row, issued[row["message_id"]], now) for row in share]
            answers.append(
                Answer(
                    claimed=[m for m in claimed if m.message_id in won],
                    superseded=frozenset(r.message_id for r in ask.retire) & superseded,
                    changed={ref.handle: changed[ref.handle] for ref, _ in ask.changes},
                    error=limit if ask.wanted and limit is not None else None,
                )
            )
        return answers

    tables = ctx.tables_for(record)
    answers = tables.transact(record.location, attempt, f"a shared round on {record.name!r}")
    return _claim_again(ctx, record, asks, answers) if any(missed) else answers


def _claim_again(
    ctx: QueueContext, record: QueueRecord, asks: list[Ask], answers: list[Answer]
) -> list[Answer]:
    """The claims that got nothing because other brokers took their spares meanwhile, again from
    a read of the table, in a round of their own (spares.py). The first round's deletes and
    visibility changes committed: an error of this one leaves those callers with no messages,
    as a receive may come back, rather than failing everyone's committed work."""
    empty = [i for i, (ask, answer) in enumerate(zip(asks, answers, strict=True))
             if ask.wanted and not answer.claimed and answer.error is None]  # fmt: skip
    if not empty:
        return answers
    try:
        again = run(ctx, record, [Ask(wanted=asks[i].wanted, timeout=asks[i].timeout,
                                      token=asks[i].token) for i in empty])  # fmt: skip
    except Exception:
        log.warning("claiming again on %s failed", record.name, exc_info=True)
        return answers
    answers = list(answers)
    for i, answer in zip(empty, again, strict=True):
        answers[i] = replace(answers[i], claimed=answer.claimed, error=answer.error)
    return answers


def _commit(writes: RoundChanges) -> bool:
    """Runs the round's one statement; whether its counts say every row was done."""
    if not writes.rows:
        return True
    counts = writes.by_merge() if writes.merge_pays() else writes.by_update()
    return counts.all_of(writes.rows)


def _shares(found: list[Row], wants: list[int], granted: int) -> list[list[Row]]:
    """The candidates dealt to the callers in the order they asked, each up to what it wants,
    all together up to what the in-flight limit granted."""
    rows: Iterator[Row] = iter(found[:granted])
    shares = []
    for want in wants:
        shares.append(list(islice(rows, want)))
    return shares

"""Single-message operations through the queue's group committer (see rounds/committer.py).

Each receive, delete, visibility change, heartbeat extension and worker-loop exchange becomes an
`Ask`; the asks that meet in one round share one commit. A round of one runs its operation's own
statement, exactly as without a committer. A round of several on a standard queue (and, alone, the
worker loop's exchange, which retires and claims at once, or an ask over EXCHANGE_UPDATE_MAX_ROWS
rows, for which a MERGE beats long literal lists) runs standard.py's one statement, which retires,
extends and claims for all of them; each caller gets its own `Answer`. FIFO queues take one ask
per round, by its own statement: a FIFO claim takes whole group prefixes and fails as a whole,
which is not to be shared with other callers' operations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...errors import OverLimit, ReceiptHandleIsInvalid
from ...limits import (
    EXCHANGE_UPDATE_MAX_ROWS,
    LONG_POLL_INTERVAL_SECONDS,
    NATIVE_ROUND_MAX_ROWS,
    ROUND_MAX_ROWS,
)
from ...model import BatchResult, Message
from ...rules import handles
from ...rules.handles import HandleRef
from ...store.registry import QueueRecord
from ..context import QueueContext
from ..messages import acknowledge, claim, visibility
from ..messages.visibility import Outcomes
from . import standard
from .requests import Answer, Ask


def submit(ctx: QueueContext, record: QueueRecord, ask: Ask) -> Answer:
    """Runs `ask` in the queue's next round; returns this caller's own answer."""
    if record.attributes.fifo:
        take = _one
    elif ctx.tables_for(record).engine == "native":
        take = _fitting_native
    else:
        take = _fitting
    committer = ctx.commits.of(record.location, take)
    return committer.submit(ask, lambda asks: run_round(ctx, record, asks))


def _one(asks: Sequence[Ask]) -> int:
    return 1


def _fitting_native(asks: Sequence[Ask]) -> int:
    return _fitting(asks, NATIVE_ROUND_MAX_ROWS)


def _fitting(asks: Sequence[Ask], max_rows: int = ROUND_MAX_ROWS) -> int:
    """The oldest asks whose rows fit one round (a larger ask runs alone), up to the first that
    names a message an earlier one of the round names: that one waits for the next round, so
    that every caller gets the outcome it would get in a round of its own, in the order they
    asked (a stale handle's delete never voids the current one's, a release never hides
    behind a heartbeat of the same handle)."""
    rows = 0
    named: set[str] = set()
    for taken, ask in enumerate(asks):
        rows += ask.rows
        mine = ask.messages()
        if ask.token is not None:  # a claim of its own token runs alone
            return taken or 1
        if rows > max_rows or (taken and not named.isdisjoint(mine)):
            return taken
        named |= mine
    return len(asks)


def run_round(ctx: QueueContext, record: QueueRecord, asks: list[Ask]) -> list[Answer]:
    try:
        return _run_round(ctx, record, asks)
    finally:
        # Messages this round made visible at once, older than the spares (spares.py).
        if any(ask.shows_at_once() for ask in asks):
            ctx.spares.drop(record.location)


def _run_round(ctx: QueueContext, record: QueueRecord, asks: list[Ask]) -> list[Answer]:
    [ask, *others] = asks
    exchange = bool(ask.retire and ask.wanted)
    if record.attributes.fifo and exchange:
        raise ValueError("the exchange is for standard queues: a FIFO claim takes whole groups")
    # Several callers, an exchange, or an ask a MERGE carries best; a FIFO ask runs alone.
    if not record.attributes.fifo and (
        others or exchange or ask.rows > EXCHANGE_UPDATE_MAX_ROWS[ctx.tables_for(record).engine]
    ):
        return standard.run(ctx, record, asks)
    if ask.changes:
        return [Answer(changed=visibility.change(ctx, record, list(ask.changes)))]
    if ask.retire:
        return [
            Answer(superseded=frozenset(acknowledge.delete_refs(ctx, record, list(ask.retire))))
        ]
    try:
        claimed = claim.claim(ctx, record, ask.wanted, ask.timeout, token=ask.token)
        return [Answer(claimed=claimed)]
    except OverLimit as error:
        return [Answer(error=error)]


# -- the operations ---------------------------------------------------------------------------------


def receive(
    ctx: QueueContext,
    name: str,
    max_messages: int,
    visibility_timeout: int | None,
    wait_time_seconds: int,
) -> list[Message]:
    """Claims up to `max_messages`; long polls for up to `wait_time_seconds` when none is there."""
    deadline = time.monotonic() + wait_time_seconds
    while True:
        record = ctx.record(name)
        timeout = (
            record.attributes.visibility_timeout
            if visibility_timeout is None
            else visibility_timeout
        )
        answer = submit(ctx, record, Ask(wanted=max_messages, timeout=timeout))
        if answer.error is not None and not wait_time_seconds:
            raise answer.error
        remaining = deadline - time.monotonic()
        if answer.claimed or remaining <= 0:
            return answer.claimed
        time.sleep(min(LONG_POLL_INTERVAL_SECONDS, remaining))


def delete(ctx: QueueContext, name: str, receipt_handle: str) -> None:
    record = ctx.record(name)
    ref = handles.parse(record.secret, receipt_handle)
    if submit(ctx, record, Ask(retire=(ref,))).superseded:
        raise ReceiptHandleIsInvalid(
            f"receipt handle for message {ref.message_id} is no longer valid: a later receive"
            " or a release superseded it; use the handle of the latest receive"
        )


def delete_batch(ctx: QueueContext, name: str, receipt_handles: list[str]) -> BatchResult:
    """One ask for every valid handle; each handle's own outcome, as `delete` of it alone would
    give: of several handles of one message, only the one it holds can delete it."""
    record = ctx.record(name)
    refs: dict[str, HandleRef] = {}
    failed: dict[str, str] = {}
    invalid = ReceiptHandleIsInvalid.code
    for handle in dict.fromkeys(receipt_handles):
        try:
            refs[handle] = handles.parse(record.secret, handle)
        except ReceiptHandleIsInvalid:
            failed[handle] = invalid
    failed.update(dict.fromkeys(acknowledge.stale_beside(ctx, record, refs), invalid))
    asked = {handle: ref for handle, ref in refs.items() if handle not in failed}
    if asked:
        superseded = submit(ctx, record, Ask(retire=tuple(asked.values()))).superseded
        failed.update({h: invalid for h, r in asked.items() if r.message_id in superseded})
    return BatchResult(successful=[h for h in refs if h not in failed], failed=failed)


def change_visibility(
    ctx: QueueContext, name: str, entries: list[tuple[str, int]], *, latest_receive: bool = False
) -> Outcomes:
    """Applies every entry in one ask; each handle's outcome (None: applied). With
    `latest_receive`, an entry whose handle a later receive superseded applies to that receive
    while its message is in flight, as SQS applies it (the SQS endpoint's)."""
    record = ctx.record(name)
    valid, outcomes = visibility.parse_entries(record, entries)
    if valid:
        outcomes.update(submit(ctx, record, Ask(changes=tuple(valid))).changed)
    superseded = [
        (ref, seconds)
        for ref, seconds in valid
        if isinstance(outcomes[ref.handle], ReceiptHandleIsInvalid)
        and not outcomes[ref.handle].message_gone  # type: ignore[union-attr]
    ]
    if latest_receive and superseded:
        outcomes.update(_to_latest_receives(ctx, record, superseded))
    return outcomes


def _to_latest_receives(
    ctx: QueueContext, record: QueueRecord, superseded: list[tuple[HandleRef, int]]
) -> Outcomes:
    """Superseded handles' changes applied to their messages' current receives, in one ask."""
    held = visibility.current_receives(ctx, record, [ref for ref, _ in superseded])
    again = {held[ref.message_id].handle: (held[ref.message_id], seconds)
             for ref, seconds in superseded if ref.message_id in held}  # fmt: skip
    applied = submit(ctx, record, Ask(changes=tuple(again.values()))).changed if again else {}
    outcomes: Outcomes = {}
    for ref, _ in superseded:
        current = held.get(ref.message_id)
        outcomes[ref.handle] = (
            applied[current.handle] if current is not None else visibility.not_in_flight(ref)
        )
    return outcomes


def extend(ctx: QueueContext, name: str, receipt_handles: list[str], seconds: int) -> Outcomes:
    """One heartbeat: every handle's visibility to `seconds` from now, in one ask."""
    return change_visibility(ctx, name, [(handle, seconds) for handle in receipt_handles])


def change_visibility_batch(
    ctx: QueueContext, name: str, entries: list[tuple[str, int]], *, latest_receive: bool = False
) -> BatchResult:
    """`change_visibility` with each entry's outcome as a BatchResult."""
    outcomes = change_visibility(ctx, name, entries, latest_receive=latest_receive)
    return BatchResult(
        successful=[handle for handle, error in outcomes.items() if error is None],
        failed={handle: error.code for handle, error in outcomes.items() if error is not None},
    )


def settle_and_claim(
    ctx: QueueContext, record: QueueRecord, finished: list[HandleRef], wanted: int, timeout: int
) -> Answer:
    """The worker loop's step on a standard queue: retire the finished batch, claim the next (on
    the native engine, in two rounds when together they would be more than one can carry)."""
    big = len(finished) + wanted > NATIVE_ROUND_MAX_ROWS
    if finished and big and ctx.tables_for(record).engine == "native":
        retired = submit(ctx, record, Ask(retire=tuple(finished)))
        claimed = submit(ctx, record, Ask(wanted=wanted, timeout=timeout))
        return Answer(claimed=claimed.claimed, superseded=retired.superseded, error=claimed.error)
    return submit(ctx, record, Ask(retire=tuple(finished), wanted=wanted, timeout=timeout))

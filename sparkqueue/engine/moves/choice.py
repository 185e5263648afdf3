"""Which moves a broker makes (moves/steps.py): Spark's, at DataFrame scale, where it has a session;
else the rows at hand through the native engine."""

from __future__ import annotations

from ...errors import InvalidParameterValue, QueueDoesNotExist
from ...store.registry import QueueRecord
from ..context import QueueContext
from .steps import Moves, RowMoves, StepHook, no_hook


def movers(ctx: QueueContext, on_step: StepHook = no_hook) -> Moves:
    if ctx.bulk is None:
        return RowMoves(ctx, on_step)
    from .frames import Mover  # Spark's: loaded only where a session is

    return Mover(ctx, on_step)


def check_destination(ctx: QueueContext, source: QueueRecord, destination: str) -> None:
    """Where a move by request may take a queue's messages: another queue, of the same type."""
    if destination == source.name:
        raise InvalidParameterValue(f"cannot move messages of {source.name!r} to itself")
    target = ctx.registry.get(destination, fresh=True)
    if target is None:
        raise QueueDoesNotExist(f"destination queue {destination!r} does not exist")
    if target.attributes.fifo != source.attributes.fifo:
        raise InvalidParameterValue(
            f"messages of {source.name!r} can only move to a queue of the same type (FIFO"
            f" or standard); {destination!r} is not"
        )

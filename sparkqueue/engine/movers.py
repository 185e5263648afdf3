"""Which moves a broker makes (moves.py): Spark's, at DataFrame scale, where it has a session;
else the rows at hand through the native engine."""

from __future__ import annotations

from .context import QueueContext
from .moves import Moves, RowMoves, StepHook, no_hook


def movers(ctx: QueueContext, on_step: StepHook = no_hook) -> Moves:
    if ctx.bulk is None:
        return RowMoves(ctx, on_step)
    from .moves_df import Mover  # Spark's: loaded only where a session is

    return Mover(ctx, on_step)

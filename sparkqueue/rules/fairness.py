"""Fair queues: which tenants of a standard queue are noisy, and which messages a receive prefers.

A standard queue's `group_id` names a tenant, as in SQS's fair queues. A tenant turns noisy when
it holds more than NOISY_SHARE of the queue's in-flight messages and at least NOISY_MIN_IN_FLIGHT
of its own: its consumers' share is out of proportion, so a receive takes quiet tenants' messages
first, and a noisy tenant's only when no quiet one is visible, the noisy tenants with the fewest
in flight first. It stays noisy until its backlog is gone (as in SQS): its share falls as soon as
quiet tenants are served first, and it must not turn quiet, and its backlog go first, for that. A message without a group is a tenant of its own, as in SQS, so it is never
noisy. Written once: receives (both engines, alone or in rounds) read through a `TenantView`, and
`stats` sums the quiet tenants' counts with `noisy_groups`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..limits import NOISY_MIN_IN_FLIGHT, NOISY_SHARE
from .expr import Expr, col, lit, when


def noisy_groups(
    in_flight: Mapping[str | None, int],
    backlog: Mapping[str | None, int],
    were_noisy: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """The noisy tenants, fewest in flight first, from each group's messages in flight and
    visible (None: the messages without a group, counted in the whole but never one tenant
    together), and the tenants that were noisy at the last count."""
    total = sum(in_flight.values())

    def noisy(group: str | None, count: int) -> bool:
        if group is None:
            return False
        if count >= NOISY_MIN_IN_FLIGHT and count > NOISY_SHARE * total:
            return True
        return group in were_noisy and backlog.get(group, 0) > 0

    groups = set(in_flight) | set(backlog)
    found = [(in_flight.get(g, 0), g) for g in groups if noisy(g, in_flight.get(g, 0))]
    return tuple(group for _, group in sorted(found))


@dataclass(frozen=True)
class TenantView:
    """What a receive knows of a queue's tenants: the noisy ones (fewest in flight first), and
    the least id a quiet tenant's claimable message had when they were counted (or the ids of
    messages sent since shortly before then: newer ones), so that the read of quiet messages
    skips every file of older ids by its statistics."""

    noisy: tuple[str, ...] = ()
    quiet_from: str = ""

    def quiet(self) -> Expr:
        """A message of a quiet tenant (not in a noisy group; one without a group is quiet)."""
        if not self.noisy:
            return lit(True)
        return col("group_id").is_null() | ~col("group_id").isin(list(self.noisy))

    def quiet_candidates(self) -> Expr:
        """Where a receive looks for quiet tenants' messages first."""
        return self.quiet() & (col("message_id") >= lit(self.quiet_from))

    def rank(self) -> Expr:
        """The noisy tenants' order: 1, 2... as in `noisy` (0 for any other message)."""
        group = col("group_id")
        return when([(group == lit(name), lit(rank)) for rank, name in enumerate(self.noisy, 1)],
                    lit(0))  # fmt: skip

"""Fair queues: which tenants of a standard queue are noisy, and which messages a receive prefers.

A standard queue's `group_id` names a tenant, as in SQS's fair queues. SQS judges a tenant by two
measures, and so does this rule, from each tenant's messages in flight at each count:
- concurrency: it holds more than NOISY_SHARE of the queue's in-flight messages, and at least
  NOISY_MIN_IN_FLIGHT of its own;
- processing time: its recent share of the consumers' time is more than NOISY_SHARE while it has
  a backlog. A message's time in flight is consumer time, so the share is its share of the
  in-flight messages, averaged over the last RECENT_SECONDS (by time, however often counted; a
  tenant first met: its share then). A count with fewer than SHARE_MIN_IN_FLIGHT in flight in all
  says nothing of shares (one message of one in flight is no tenant's "all"): it counts as 0.
  The share must also be more than NOISY_EVEN_SHARES even shares (SQS: "a disproportionate
  share"): when consumers are busy, nine quiet tenants beside a noisy one that is held back each
  hold a ninth, over a tenth, and have a backlog; noisy all, nobody would go first.
A noisy tenant stays noisy while its backlog is longer than a quiet tenant's on average and it
has more than half of NOISY_SHARE of recent time (SQS: "until its shares drop to levels
comparable with the quiet tenants"; a tenant stops being noisy once its backlog is consumed):
held back, its share falls, and its backlog must not go first again for that alone, nor starve
once the others fill the consumers; one judged noisy in a busy moment with a backlog like the
others' is let go. A receive takes quiet tenants' messages first, and a noisy tenant's only when
no quiet one is visible, the noisy tenants with the least recent share first (SQS: the fewest in
flight; a tenant held back has few in flight at any moment, and would come first at every other
count). A message without a group is a tenant of its own, as in SQS, so it is never noisy.
Written once: receives (both engines, alone or in rounds) read through a `TenantView`, and `stats`
sums the quiet tenants' counts with `judge`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..limits import (
    NOISY_EVEN_SHARES,
    NOISY_MIN_IN_FLIGHT,
    NOISY_SHARE,
    RECENT_SECONDS,
    SHARE_MIN_IN_FLIGHT,
)
from .expr import Expr, col, lit, when

Counts = Mapping[str | None, int]  # per group (None: the messages without one)
FORGOTTEN_SHARE = 0.01  # a tenant with nothing in flight is forgotten below this recent share


def tenant_counts(groups: Mapping[str | None, Mapping[str, int]]) -> tuple[Counts, Counts]:
    """Each group's messages in flight and visible, from a count's grouped rows (`in_flight`,
    `visible`)."""
    return (
        {group: row["in_flight"] for group, row in groups.items()},
        {group: row["visible"] for group, row in groups.items()},
    )


def judge(
    in_flight: Counts, backlog: Counts, before: TenantView, elapsed: float | None
) -> tuple[tuple[str, ...], dict[str, float]]:
    """The noisy tenants, the least recent share first, and each tenant's recent share, from
    each group's messages in flight and visible now, and the view of the count `elapsed`
    seconds before (None: no count before)."""
    total = sum(in_flight.values())
    weight = 1.0 if elapsed is None else 1 - math.exp(-elapsed / RECENT_SECONDS)
    earlier = dict(before.shares)
    groups = {g for g in (*in_flight, *backlog, *earlier) if g is not None}
    shares: dict[str, float] = {}
    noisy = []
    busy = busy_share(in_flight, backlog)
    # The backlog of a tenant not held back, on average (another noisy tenant's, however long,
    # does not raise it): a tenant held back stays so while its own backlog is longer.
    quiet = [g for g in groups if g not in before.noisy and (in_flight.get(g) or backlog.get(g))]
    quiet_tenants = len(quiet) + in_flight.get(None, 0) + backlog.get(None, 0)
    quiet_waiting = sum(backlog.get(g, 0) for g in quiet) + backlog.get(None, 0)
    for group in groups:
        count, waiting = in_flight.get(group, 0), backlog.get(group, 0)
        now = count / total if total >= SHARE_MIN_IN_FLIGHT else 0.0
        recent = (1 - weight) * earlier[group] + weight * now if group in earlier else now
        if count or recent >= FORGOTTEN_SHARE:
            shares[group] = recent
        concurrent = count >= NOISY_MIN_IN_FLIGHT and now > NOISY_SHARE
        # Held back, it stays noisy while its backlog is longer than a quiet tenant's on average:
        # a tenant judged noisy in a busy moment, with a backlog like the others', is let go.
        longer = waiting * quiet_tenants > quiet_waiting if quiet_tenants else True
        held = group in before.noisy and recent > NOISY_SHARE / 2 and longer
        if concurrent or (waiting and (recent > busy or held)):
            noisy.append((recent, count, group))
    return tuple(group for *_, group in sorted(noisy)), shares


def busy_share(in_flight: Counts, backlog: Counts) -> float:
    """The share above which a tenant is busy: NOISY_SHARE, or NOISY_EVEN_SHARES even shares
    among the tenants with messages now (each message without a group a tenant of its own)."""
    tenants = sum(
        1 for g in {*in_flight, *backlog} if g is not None and (in_flight.get(g) or backlog.get(g))
    )
    tenants += in_flight.get(None, 0) + backlog.get(None, 0)
    return max(NOISY_SHARE, NOISY_EVEN_SHARES / max(tenants, 1))


def suspect(in_flight: Counts, backlog: Counts, noisy: tuple[str, ...]) -> bool:
    """Whether a tenant holds more than a busy share of the visible backlog, and at least
    SHARE_MIN_IN_FLIGHT messages of it, while nobody is judged noisy though `judge` could (as
    many in flight in all): one may be starting to flood, before its share of the consumers'
    time shows it, and the next count should come soon. Tenants with even backlogs, however
    long, a few messages waiting, and a queue too idle to judge are not suspect."""
    waiting = sum(backlog.values())
    if noisy or sum(in_flight.values()) < SHARE_MIN_IN_FLIGHT:
        return False
    busy = busy_share(in_flight, backlog)
    return any(
        group is not None and count >= SHARE_MIN_IN_FLIGHT and count > busy * waiting
        for group, count in backlog.items()
    )


def counts_soon(in_flight: Counts, backlog: Counts, noisy: tuple[str, ...], first: bool) -> bool:
    """Whether the next count should come soon: after a first count that judged nobody noisy
    (nothing was known before it), and while a tenant is `suspect`."""
    return (first and not noisy) or suspect(in_flight, backlog, noisy)


@dataclass(frozen=True)
class TenantView:
    """What a receive knows of a queue's tenants at the last count: the noisy ones (the least
    busy first), and the least id a quiet tenant's claimable message had (or the ids of
    messages sent since shortly before then: newer ones), so that the read of quiet messages
    skips every file of older ids by its statistics."""

    noisy: tuple[str, ...] = ()
    quiet_from: str = ""
    # Whether the count found a noisy tenant's message visible and any other tenant's message
    # (visible or in flight): if not, a receive reads as if none were noisy until the next count
    # (a tenant alone, or one whose consumers keep up, costs nothing more).
    contended: bool = False
    shares: tuple[tuple[str, float], ...] = ()  # each tenant's recent share (see `judge`)
    # Whether the next count should come soon: the first count, or a tenant `suspect` (a tenant
    # may be starting to flood: engine/messages/tenants.py).
    soon: bool = False

    def quiet(self) -> Expr:
        """A message of a quiet tenant (not in a noisy group; one without a group is quiet)."""
        if not self.noisy:
            return lit(True)
        return col("group_id").is_null() | ~col("group_id").isin(list(self.noisy))

    def quiet_candidates(self) -> Expr:
        """Where a receive looks for quiet tenants' messages first."""
        return self.quiet() & (col("message_id") >= lit(self.quiet_from))

    def rank(self) -> Expr:
        """The noisy tenants' order: 1, 2... as in `noisy` (0 for any other message); only
        several noisy tenants need it."""
        group = col("group_id")
        return when([(group == lit(name), lit(rank)) for rank, name in enumerate(self.noisy, 1)],
                    lit(0))  # fmt: skip

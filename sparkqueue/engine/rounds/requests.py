"""What a caller asks of a round (`Ask`) and what it gets back (`Answer`): see operations.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import QueueError
from ...model import Message
from ...rules.handles import HandleRef
from ..messages.visibility import Outcomes


@dataclass(frozen=True)
class Ask:
    """One caller's operation: messages to retire (delete), visibility changes, and how many
    messages to claim with which visibility timeout. `token`, when given, is the claim's own
    (its handles are `handles.issue(secret, token, ...)`), so that its caller can find the
    claimed rows again from the token alone (a stream's batch); such an ask runs alone."""

    retire: tuple[HandleRef, ...] = ()
    changes: tuple[tuple[HandleRef, int], ...] = ()
    wanted: int = 0
    timeout: int = 0
    token: str | None = None

    def messages(self) -> set[str]:
        """The ids of the messages this ask deletes or changes."""
        return {ref.message_id for ref in self.retire} | {ref.message_id for ref, _ in self.changes}

    def shows_at_once(self) -> bool:
        """Whether this ask makes messages visible at once: a claim with no visibility timeout,
        or a visibility change to 0."""
        return bool(self.wanted and not self.timeout) or any(not s for _, s in self.changes)

    @property
    def rows(self) -> int:
        """How many rows this ask may touch: what a round's statement is sized by."""
        return len(self.retire) + len(self.changes) + self.wanted


@dataclass(frozen=True)
class Answer:
    """One caller's outcome: its claimed messages, the ids of its retired messages that were not
    deleted (their handles superseded), each visibility change's error or None, and the claim's
    error (OverLimit) if it could claim nothing."""

    claimed: list[Message] = field(default_factory=list)
    superseded: frozenset[str] = frozenset()
    changed: Outcomes = field(default_factory=dict)
    error: QueueError | None = None

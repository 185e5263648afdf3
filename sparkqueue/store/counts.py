"""What a MERGE, UPDATE or DELETE changed, as far as the session says."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Counts:
    """Rows a statement changed, or `known=False` where the session does not report them; the
    table version it committed, where the engine says (the native engine's statements)."""

    known: bool
    updated: int = 0
    deleted: int = 0
    inserted: int = 0
    version: int | None = None

    @property
    def changed(self) -> int:
        return self.updated + self.deleted + self.inserted

    def all_of(self, expected: int) -> bool:
        """True only when the counts are known and exactly `expected` rows changed."""
        return self.known and self.changed == expected


UNKNOWN = Counts(known=False)

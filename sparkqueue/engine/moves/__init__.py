"""Moving messages between queue tables (dead-letter moves, moves back), crash-safe in three
commits that Delta cannot make together."""

"""Shared commits: the operations that callers of one broker make on a queue while a commit is
in flight meet in the queue's next round, which commits once for all of them."""

"""Optimistic transactions: conflicts are retried with backoff, then reported; nothing else is."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
from pyspark.errors import PySparkException

from sparkqueue.errors import TransactionConflict
from sparkqueue.store.transactions import (
    STALE_READ_MARKER,
    ConflictCounter,
    RetryPolicy,
    is_commit_conflict,
    run_transaction,
)

FAST = RetryPolicy(attempts=4, base_delay=0.0, max_delay=0.0)


def conflict() -> PySparkException:
    return PySparkException(message=f"boom {STALE_READ_MARKER}")


def run(action, counter: ConflictCounter | None = None):
    return run_transaction(
        action, lock=nullcontext, policy=FAST, counter=counter or ConflictCounter(), what="test"
    )


def test_a_conflict_is_retried_until_the_action_commits():
    outcomes = iter([conflict(), conflict(), "done"])

    def action():
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    counter = ConflictCounter()
    assert run(action, counter) == "done"
    assert counter.value == 2


def test_endless_conflicts_end_in_transaction_conflict():
    def action():
        raise conflict()

    with pytest.raises(TransactionConflict, match="gave up after 4 attempts"):
        run(action)


def test_other_errors_are_not_retried():
    calls = []

    def action():
        calls.append(1)
        raise ValueError("not a conflict")

    with pytest.raises(ValueError):
        run(action)
    assert calls == [1]
    assert not is_commit_conflict(ValueError("x"))


def test_backoff_is_jittered_and_bounded():
    policy = RetryPolicy(attempts=10, base_delay=0.02, max_delay=1.0)
    assert all(0 <= policy.delay(attempt) <= 1.0 for attempt in range(20) for _ in range(5))


@pytest.mark.parametrize(
    ("text", "retried"),
    [
        ("Failed to commit transaction: a concurrent transactions added new data", True),
        ("Failed to commit transaction: Metadata changed since last commit.", True),
        ("Protocol changed since last commit: reader versions", True),
        ("Failed to commit transaction: 15", True),  # delta-rs's own attempts used up
        ("Unsupported table features required: [RowTracking, DomainMetadata]", False),
        ("Table is append-only", False),
    ],
)
def test_the_native_engines_commit_failures_are_retried_unless_no_retry_can_help(text, retried):
    from deltalake.exceptions import CommitFailedError

    assert is_commit_conflict(CommitFailedError(text)) is retried

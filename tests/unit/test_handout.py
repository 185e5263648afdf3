"""When claimed messages become visible again (engine/messages/handout.py), on the broker's clock (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sparkqueue.engine.messages.handout import Handouts
from sparkqueue.limits import HANDOUT_ALLOWANCE_MAX_SECONDS

T = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_timeout_runs_from_the_handout_and_zero_means_visible_at_once():
    handouts = Handouts()
    assert handouts.until("q", T, 10) == T + timedelta(seconds=10)  # nothing measured yet
    handouts.took("q", T, T + timedelta(seconds=2))  # a claim statement took 2 s
    assert handouts.until("q", T, 10) == T + timedelta(seconds=12)
    assert handouts.until("q", T, 0) == T  # SQS: a timeout of 0 leaves it visible at once
    assert handouts.until("other", T, 10) == T + timedelta(seconds=10)  # per queue table


def test_one_slow_statement_adds_a_bounded_allowance():
    handouts = Handouts()
    handouts.took("q", T, T + timedelta(minutes=10))
    assert handouts.until("q", T, 30) == T + timedelta(seconds=30 + HANDOUT_ALLOWANCE_MAX_SECONDS)
    handouts.took("q", T, T - timedelta(seconds=5))  # a clock set back: never a negative share
    assert handouts.until("q", T, 30) == T + timedelta(seconds=30)

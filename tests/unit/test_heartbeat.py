"""Heartbeats: an interval that can keep messages hidden, and failures that are never silent."""

from __future__ import annotations

import itertools
import time

import pytest

from sparkqueue.errors import HeartbeatFailed, InvalidParameterValue, ReceiptHandleIsInvalid
from sparkqueue.services.heartbeat import Heartbeat, check_interval


@pytest.mark.parametrize("interval", [0, -1, True, "1", 30, 31])
def test_an_interval_that_cannot_keep_messages_hidden_is_rejected(interval):
    with pytest.raises(InvalidParameterValue):
        check_interval(30, interval)


def test_a_shorter_interval_is_accepted():
    assert check_interval(30, 29.5) == 29.5


def test_gone_messages_are_dropped_and_other_failures_raised_on_exit():
    def extend(handles, seconds):
        return {
            "kept": None,
            "gone": ReceiptHandleIsInvalid("deleted", message_gone=True),
            "stolen": ReceiptHandleIsInvalid("superseded"),
        }

    beat = Heartbeat(extend, ["kept", "gone", "stolen"], 30, 10)
    beat.beat()
    assert beat.held == ["kept"]
    with pytest.raises(HeartbeatFailed, match="superseded"), beat:
        pass


def test_beats_come_early_enough_for_the_time_an_extension_takes():
    """A 2 s timeout, extensions taking 0.3 s: waiting the 1.9 s interval after each would leave
    the message visible for moments; the beats start 2 - 2 x 0.3 = 1.4 s apart instead."""
    starts: list[float] = []

    def slow_extend(handles, seconds):
        starts.append(time.monotonic())
        time.sleep(0.3)
        return dict.fromkeys(handles)

    with Heartbeat(slow_extend, ["held"], 2, 1.9):
        time.sleep(4.6)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(gaps) >= 2
    assert all(1.3 <= gap <= 1.6 for gap in gaps), gaps


def test_beats_keep_to_the_interval_when_extensions_are_quick():
    starts: list[float] = []

    def quick_extend(handles, seconds):
        starts.append(time.monotonic())
        return dict.fromkeys(handles)

    with Heartbeat(quick_extend, ["held"], 30, 0.5):
        time.sleep(1.8)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert gaps and all(0.45 <= gap <= 0.7 for gap in gaps), gaps

"""Heartbeats: an interval that can keep messages hidden, and failures that are never silent."""

from __future__ import annotations

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

"""send/send_batch entries: SQS's rules per queue type, checked before anything is written."""

from __future__ import annotations

import pytest

from sparkqueue.attributes import QueueAttributes
from sparkqueue.engine.frames.send_df import invalid_row_problem
from sparkqueue.engine.messages.send import normalize_entry
from sparkqueue.errors import InvalidParameterValue, MissingParameter
from sparkqueue.rules.ids import content_deduplication_id

STANDARD = QueueAttributes(delay_seconds=5)
FIFO = QueueAttributes(fifo=True, content_based_deduplication=True)


def test_a_str_is_a_body_with_the_queues_delay():
    entry = normalize_entry("hello", STANDARD)
    assert (entry.body, entry.delay_seconds, entry.attributes) == ("hello", 5, {})


def test_fifo_entries_need_a_group_and_take_no_delay():
    with pytest.raises(MissingParameter, match="group_id"):
        normalize_entry("x", FIFO)
    with pytest.raises(InvalidParameterValue, match="delay_seconds"):
        normalize_entry({"body": "x", "group_id": "g", "delay_seconds": 1}, FIFO)
    entry = normalize_entry({"body": "x", "group_id": "g"}, FIFO)
    assert entry.deduplication_id == content_deduplication_id("x")


@pytest.mark.parametrize(
    "entry",
    [
        {"body": ""},
        {"colour": "red", "body": "x"},
        {"delay_seconds": 1},
        3,
        {"body": "x" * 262_145},
    ],
)
def test_invalid_entries_are_rejected(entry):
    with pytest.raises(InvalidParameterValue):
        normalize_entry(entry, STANDARD)


def test_a_failed_row_check_is_recognised_in_the_write_error():
    error = RuntimeError(
        "[USER_RAISED_EXCEPTION] sparkqueue: invalid send_df row: the body is empty.\n at"
    )
    assert invalid_row_problem(error) == "the body is empty"
    assert invalid_row_problem(RuntimeError("disk full")) is None

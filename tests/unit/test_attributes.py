"""Queue attributes: SQS's defaults and ranges, immutable ones, and their stored form."""

from __future__ import annotations

import pytest

from sparkqueue.attributes import QueueAttributes
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.limits import MAX_DELAY_SECONDS, MAX_VISIBILITY_SECONDS


def test_defaults_are_sqs_defaults():
    attrs = QueueAttributes()
    assert (attrs.visibility_timeout, attrs.retention_seconds, attrs.max_message_bytes) == (
        30,
        345_600,
        262_144,
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"visibility_timeout": MAX_VISIBILITY_SECONDS + 1},
        {"delay_seconds": MAX_DELAY_SECONDS + 1},
        {"retention_seconds": 59},
        {"max_message_bytes": 1023},
        {"visibility_timeout": 1.5},
        {"visibility_timeout": True},
        {"dead_letter_queue": "dlq"},
        {"max_receive_count": 3},
        {"content_based_deduplication": True},
        {"shards": 65},
    ],
)
def test_out_of_range_or_inconsistent_attributes_are_rejected(changes):
    with pytest.raises(InvalidParameterValue):
        QueueAttributes(**changes)


def test_json_round_trip_ignores_names_it_does_not_know():
    attrs = QueueAttributes(dead_letter_queue="dlq", max_receive_count=3)
    text = attrs.to_json().replace("{", '{"retired_setting": 1, ', 1)
    assert QueueAttributes.from_json(text) == attrs


def test_changed_rejects_unknown_and_immutable_names():
    attrs = QueueAttributes()
    assert attrs.changed({"visibility_timeout": 5}).visibility_timeout == 5
    with pytest.raises(InvalidParameterValue, match="unknown"):
        attrs.changed({"colour": "red"})
    with pytest.raises(InvalidParameterValue, match="cannot change"):
        attrs.changed({"fifo": True})


def test_difference_names_each_changed_attribute():
    text = QueueAttributes().difference(QueueAttributes(visibility_timeout=60))
    assert text == "visibility_timeout=30 (asked 60)"

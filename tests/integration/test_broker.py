"""Broker: queue lifecycle, names, attribute ranges and dead-letter settings."""

from __future__ import annotations

import pytest

from sparkqueue import Broker
from sparkqueue.errors import (
    InvalidParameterValue,
    QueueAlreadyExists,
    QueueDoesNotExist,
)


def test_create_get_list_delete(broker):
    broker.create_queue("b-queue")
    broker.create_queue("a-queue")
    assert broker.list_queues() == ["a-queue", "b-queue"]
    assert broker.list_queues(prefix="a") == ["a-queue"]
    assert broker.get_queue("a-queue").name == "a-queue"
    broker.delete_queue("a-queue")
    assert broker.list_queues() == ["b-queue"]
    with pytest.raises(QueueDoesNotExist):
        broker.get_queue("a-queue")
    with pytest.raises(QueueDoesNotExist):
        broker.delete_queue("a-queue")


def test_create_is_idempotent_only_for_identical_attributes(broker):
    queue = broker.create_queue("jobs", visibility_timeout=60)
    queue.send("kept")
    again = broker.create_queue("jobs", visibility_timeout=60)
    assert again.stats().visible == 1  # the same queue, not a new empty one
    with pytest.raises(QueueAlreadyExists, match="visibility_timeout=60"):
        broker.create_queue("jobs", visibility_timeout=61)


def test_defaults_are_sqs_defaults(broker):
    attributes = broker.create_queue("defaults").attributes
    assert attributes["visibility_timeout"] == 30
    assert attributes["delay_seconds"] == 0
    assert attributes["retention_seconds"] == 345_600
    assert attributes["max_message_bytes"] == 262_144
    assert attributes["dead_letter_queue"] is None
    assert attributes["max_receive_count"] is None
    assert attributes["fifo"] is False


@pytest.mark.parametrize(
    "name",
    ["", "a" * 81, "has space", "semi;colon", "quote'", "emoji🙂", "dot.name", "x.fifo", 7, None],
)
def test_invalid_names_are_rejected_and_nothing_is_created(broker, name):
    with pytest.raises(InvalidParameterValue):
        broker.create_queue(name)
    assert broker.list_queues() == []


def test_name_limits(broker):
    assert broker.create_queue("a" * 80).name == "a" * 80
    assert broker.create_queue("Az09_-").name == "Az09_-"
    with pytest.raises(InvalidParameterValue, match=r"\.fifo"):
        broker.create_queue("ordered", fifo=True)


@pytest.mark.parametrize(
    ("attribute", "bad", "good"),
    [
        ("visibility_timeout", 43_201, 43_200),
        ("visibility_timeout", -1, 0),
        ("delay_seconds", 901, 900),
        ("retention_seconds", 59, 60),
        ("retention_seconds", 1_209_601, 1_209_600),
        ("max_message_bytes", 1023, 1024),
        ("max_message_bytes", 1_048_577, 1_048_576),
    ],
)
def test_attribute_ranges(broker, attribute, bad, good):
    with pytest.raises(InvalidParameterValue, match=attribute):
        broker.create_queue("ranged", **{attribute: bad})
    assert broker.list_queues() == []
    assert broker.create_queue("ranged", **{attribute: good}).attributes[attribute] == good


def test_attribute_types_are_not_coerced(broker):
    with pytest.raises(InvalidParameterValue):
        broker.create_queue("typed", visibility_timeout="30")
    with pytest.raises(InvalidParameterValue):
        broker.create_queue("typed", visibility_timeout=True)
    with pytest.raises(InvalidParameterValue):
        broker.create_queue("typed", delay_seconds=1.5)


def test_dead_letter_settings_are_validated(broker):
    with pytest.raises(InvalidParameterValue, match="together"):
        broker.create_queue("src", dead_letter_queue="dlq")
    with pytest.raises(InvalidParameterValue, match="together"):
        broker.create_queue("src", max_receive_count=3)
    with pytest.raises(InvalidParameterValue, match="does not exist"):
        broker.create_queue("src", dead_letter_queue="dlq", max_receive_count=3)
    broker.create_queue("dlq")
    with pytest.raises(InvalidParameterValue, match="max_receive_count"):
        broker.create_queue("src", dead_letter_queue="dlq", max_receive_count=0)
    with pytest.raises(InvalidParameterValue, match="max_receive_count"):
        broker.create_queue("src", dead_letter_queue="dlq", max_receive_count=1001)
    with pytest.raises(InvalidParameterValue, match="own dead-letter"):
        broker.create_queue("dlq2", dead_letter_queue="dlq2", max_receive_count=1)
    src = broker.create_queue("src", dead_letter_queue="dlq", max_receive_count=1000)
    assert src.attributes["dead_letter_queue"] == "dlq"
    assert broker.list_queues() == ["dlq", "src"]


def test_a_second_broker_on_the_root_sees_queues_and_attributes(spark, broker, clock):
    broker.create_queue("shared", visibility_timeout=45, delay_seconds=3)
    other = Broker(spark, broker.root, clock=clock)
    assert other.list_queues() == ["shared"]
    assert other.get_queue("shared").attributes["visibility_timeout"] == 45
    broker.get_queue("shared").set_attributes(visibility_timeout=50)
    assert Broker(spark, broker.root).get_queue("shared").attributes["visibility_timeout"] == 50


def test_set_attributes_validates_and_changes_nothing_on_error(broker):
    queue = broker.create_queue("tuned")
    with pytest.raises(InvalidParameterValue, match="visibility_timeout"):
        queue.set_attributes(visibility_timeout=50_000)
    with pytest.raises(InvalidParameterValue, match="unknown"):
        queue.set_attributes(colour="blue")
    with pytest.raises(InvalidParameterValue, match="cannot change"):
        queue.set_attributes(fifo=True)
    with pytest.raises(InvalidParameterValue, match="does not exist"):
        queue.set_attributes(dead_letter_queue="nowhere", max_receive_count=2)
    assert queue.attributes["visibility_timeout"] == 30
    broker.create_queue("tuned-dlq")
    queue.set_attributes(dead_letter_queue="tuned-dlq", max_receive_count=2, delay_seconds=5)
    assert queue.attributes["dead_letter_queue"] == "tuned-dlq"
    assert queue.attributes["delay_seconds"] == 5


def test_delete_queue_removes_its_data(broker):
    queue = broker.create_queue("temp")
    queue.send("gone with the queue")
    broker.delete_queue("temp")
    with pytest.raises(QueueDoesNotExist):
        queue.send("into a deleted queue")
    assert broker.create_queue("temp").stats().visible == 0

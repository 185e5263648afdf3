"""A FIFO queue's DeduplicationScope acted on: with `messageGroup` a deduplication id counts within
its group only, a change of scope rules the sends after it and takes back no answer given, and
every read hands the id out as it was given. Native broker and boto3 through the endpoint, real
delta-rs commits, no JVM."""

from __future__ import annotations

import json

import pytest

from sparkqueue import Broker
from sparkqueue.attributes import QueueAttributes
from sparkqueue.errors import InvalidParameterValue
from sparkqueue.rules.deduplication import SCOPE_SEPARATOR
from tests.unit.test_endpoint_as_sqs import fifo, served, sqs  # noqa: F401 (fixtures)
from tests.unit.test_native_fifo import drain

GROUPED = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}


def send(queue, body: str, group: str, deduplication_id: str = "same") -> str:
    return queue.send(body, group_id=group, deduplication_id=deduplication_id)


@pytest.fixture
def broker(tmp_path, clock) -> Broker:
    return Broker(None, str(tmp_path / "root"), clock=clock)


def test_with_message_group_scope_an_id_counts_within_its_group_only(broker):
    queue = broker.create_queue("orders.fifo", fifo=True, sqs_metadata=GROUPED)
    first_a, first_b = send(queue, "a1", "a"), send(queue, "b1", "b")
    assert first_a != first_b  # the same id in two groups: two messages
    assert send(queue, "a2", "a") == first_a  # again in its group: a duplicate of the first
    peeked = queue.peek(10)
    assert sorted((p["body"], p["deduplication_id"]) for p in peeked) == [
        ("a1", "same"),
        ("b1", "same"),
    ]
    delivered = drain(queue)
    assert sorted(m.body for m in delivered) == ["a1", "b1"]
    assert {m.deduplication_id for m in delivered} == {"same"}  # as given, without its group


def test_with_queue_scope_an_id_counts_across_groups(broker):
    queue = broker.create_queue("orders.fifo", fifo=True)
    first = send(queue, "a1", "a")
    assert send(queue, "b1", "b") == first
    assert [m.body for m in drain(queue)] == ["a1"]


def test_a_change_of_scope_rules_later_sends_and_takes_back_no_answer(broker, clock):
    queue = broker.create_queue("orders.fifo", fifo=True, sqs_metadata=GROUPED)
    send(queue, "a1", "a")
    send(queue, "b1", "b")  # accepted in its own group
    queue.set_attributes(sqs_metadata={"DeduplicationScope": "queue"})
    # Both accepted messages stay: nothing sent before the change is judged again.
    assert sorted(p["body"] for p in queue.peek(10)) == ["a1", "b1"]
    third = send(queue, "c1", "c")  # a queue-wide id from now on
    assert send(queue, "d1", "d") == third
    queue.set_attributes(sqs_metadata=GROUPED)
    clock.advance(1)
    send(queue, "e1", "e")  # within its group again: the queue-wide id does not hold it back
    assert sorted(m.body for m in drain(queue)) == ["a1", "b1", "c1", "e1"]


def test_a_redrive_pass_keeps_the_groups_apart(broker, clock):
    queue = broker.create_queue("orders.fifo", fifo=True, sqs_metadata=GROUPED)
    send(queue, "a1", "a")
    send(queue, "b1", "b")
    send(queue, "a2", "a")  # a duplicate, never delivered
    clock.advance(400)  # past the deduplication window
    broker.redrive()
    assert sorted(m.body for m in drain(queue)) == ["a1", "b1"]
    send(queue, "a3", "a")  # the window has passed: accepted
    assert [m.body for m in drain(queue)] == ["a3"]


@pytest.mark.parametrize(
    ("kind", "metadata"),
    [
        ("fifo", {"DeduplicationScope": "group"}),
        ("fifo", {"FifoThroughputLimit": "perGroup"}),
        ("standard", {"DeduplicationScope": "messageGroup"}),
    ],
)
def test_bad_fifo_modes_are_refused_and_change_nothing(broker, kind, metadata):
    name = "orders.fifo" if kind == "fifo" else "orders"
    with pytest.raises(InvalidParameterValue, match="on FIFO queues only"):
        broker.create_queue(name, fifo=kind == "fifo", sqs_metadata=metadata)
    assert broker.list_queues() == []
    queue = broker.create_queue(name, fifo=kind == "fifo")
    with pytest.raises(InvalidParameterValue):
        queue.set_attributes(sqs_metadata=metadata)
    assert queue.attributes["sqs_metadata"] == {}


def test_the_endpoint_deduplicates_by_group_and_answers_the_id_as_given(sqs):  # noqa: F811
    url = fifo(sqs, "orders.fifo", **GROUPED)
    sent = {
        group: sqs.send_message(
            QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="d-1"
        )["MessageId"]
        for group in ("a", "b")
    }
    assert sent["a"] != sent["b"]
    again = sqs.send_message(
        QueueUrl=url, MessageBody="again", MessageGroupId="a", MessageDeduplicationId="d-1"
    )
    assert again["MessageId"] == sent["a"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
    messages = got["Messages"]
    assert sorted(m["Body"] for m in messages) == ["a", "b"]
    ids = {m["Attributes"]["MessageDeduplicationId"] for m in messages}
    assert ids == {"d-1"} and SCOPE_SEPARATOR not in "".join(ids)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {name: attributes[name] for name in GROUPED} == GROUPED


def test_a_queue_an_older_version_stored_with_other_modes_still_opens():
    """The modes are checked where they are given, not where a registry row is read: a
    standard queue stored with them before they were acted on is read, and not deduplicated by
    group; it takes changes of anything else, and SQS's values of the modes only."""
    stored = {**QueueAttributes().as_dict(), "sqs_metadata": {"DeduplicationScope": "messageGroup"}}
    attributes = QueueAttributes.from_json(json.dumps(stored))
    assert not attributes.deduplicates_in_group
    assert attributes.changed({"visibility_timeout": 60}).visibility_timeout == 60
    kept = {"DeduplicationScope": "messageGroup", "Policy": "{}"}  # the endpoint's merged form
    assert attributes.changed({"sqs_metadata": kept}).sqs_metadata == kept
    with pytest.raises(InvalidParameterValue):
        attributes.changed({"sqs_metadata": {"FifoThroughputLimit": "perQueue"}})

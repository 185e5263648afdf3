"""Where the endpoint answers as Amazon SQS does and the Python API keeps its own stricter rule:
a visibility change through an older handle of a message still in flight, as many messages of
one FIFO group as a receive can take, a FIFO batch entry without a deduplication id, a message
over maxReceiveCount moved at the receive that finds it, empty tag edits, AddPermission's policy.
boto3 against a real endpoint over a native broker, in this process, on a fake clock (no JVM)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sparkqueue import Broker, Queue
from sparkqueue.endpoint import SqsEndpoint
from sparkqueue.errors import TransactionConflict
from tests.raw_http import ACCESS_KEY, REGION, SECRET_KEY
from tests.unit.endpoint_stub import KEYS


@pytest.fixture
def sqs(tmp_path, clock):
    broker = Broker(None, str(tmp_path / "root"), clock=clock)
    with SqsEndpoint(broker, port=0, access_keys=KEYS, redrive_every=0) as endpoint:
        yield boto3.client(
            "sqs",
            endpoint_url=endpoint.url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(retries={"max_attempts": 1}),
        )


def code(call, **params) -> tuple[int, str]:
    with pytest.raises(ClientError) as error:
        call(**params)
    response = error.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def fifo(sqs, name: str, **attributes: str) -> str:
    return sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})[
        "QueueUrl"
    ]


def test_an_older_handle_of_a_message_in_flight_changes_its_visibility(sqs, clock):
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    [first] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10)["Messages"]
    clock.advance(11)
    [second] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]
    old = first["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=0)
    [third] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]  # visible
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "first", "ReceiptHandle": old, "VisibilityTimeout": 0},
            {"Id": "second", "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 0},
        ],
    )
    assert sorted(e["Id"] for e in changed["Successful"]) == ["first", "second"]
    [fourth] = sqs.receive_message(QueueUrl=url)["Messages"]  # both made it visible
    assert fourth["MessageId"] == third["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=fourth["ReceiptHandle"])
    gone = code(sqs.change_message_visibility, QueueUrl=url, ReceiptHandle=old,
                VisibilityTimeout=5)  # fmt: skip
    assert gone == (400, "InvalidParameterValue")  # the message is gone: the error stays


def test_a_fifo_receive_takes_as_many_of_one_group_as_it_can(sqs):
    for attempt in range(5):
        url = fifo(sqs, f"groups-{attempt}.fifo", ContentBasedDeduplication="true")
        for body, group in (("b1", "b"), ("a1", "a"), ("a2", "a")):
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
        assert [m["Body"] for m in got] == ["a1", "a2"]


def test_a_fifo_batch_entry_without_a_deduplication_id_fails_the_whole_call(sqs):
    url = fifo(sqs, "strict.fifo")
    entries = [
        {"Id": "one", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "x"},
        {"Id": "two", "MessageBody": "y", "MessageGroupId": "g"},
    ]
    assert code(sqs.send_message_batch, QueueUrl=url, Entries=entries) == (
        400,
        "InvalidParameterValue",
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


@pytest.mark.parametrize("kind", ["standard", "fifo"])
def test_a_message_over_max_receive_count_moves_at_the_receive_that_finds_it(sqs, clock, kind):
    suffix, extra = (".fifo", {"FifoQueue": "true"}) if kind == "fifo" else ("", {})
    dead = sqs.create_queue(QueueName=f"dead{suffix}", Attributes=extra)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    url = sqs.create_queue(
        QueueName=f"work{suffix}", Attributes={**extra, "RedrivePolicy": policy}
    )["QueueUrl"]
    group = {"MessageGroupId": "g"} if kind == "fifo" else {}
    for body in ("poison", "next"):
        dedup = {"MessageDeduplicationId": body} if kind == "fifo" else {}
        sqs.send_message(QueueUrl=url, MessageBody=body, **group, **dedup)
        if kind == "standard":
            break
    [poison] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=5)["Messages"]
    assert poison["Body"] == "poison"
    clock.advance(6)
    after = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    # FIFO: its group goes on in the same receive
    assert [m["Body"] for m in after.get("Messages", [])] == (["next"] if kind == "fifo" else [])
    [moved] = sqs.receive_message(QueueUrl=dead)["Messages"]
    assert (moved["MessageId"], moved["Body"]) == (poison["MessageId"], "poison")


def test_a_dead_letter_move_that_fails_at_a_receive_costs_it_nothing(sqs, monkeypatch):
    dead = sqs.create_queue(QueueName="dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 3})
    url = sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")

    def conflicting(self, limit=None):
        raise TransactionConflict("moves kept conflicting")

    monkeypatch.setattr(Queue, "move_to_dead_letter_queue", conflicting)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["m"]  # a short receive, and its move failed


def test_empty_tag_edits_are_refused(sqs):
    url = sqs.create_queue(QueueName="tagged")["QueueUrl"]
    assert code(sqs.tag_queue, QueueUrl=url, Tags={}) == (400, "MissingParameter")
    assert code(sqs.untag_queue, QueueUrl=url, TagKeys=[]) == (400, "InvalidParameterValue")


def test_add_permission_writes_the_policy_as_sqs_does(sqs):
    url = sqs.create_queue(QueueName="shared")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    sqs.add_permission(QueueUrl=url, Label="one", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])  # fmt: skip
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    policy = json.loads(attributes["Policy"])
    assert policy["Id"] == f"{arn['QueueArn']}/SQSDefaultPolicy"
    [statement] = policy["Statement"]
    assert statement["Action"] == "SQS:SendMessage"
    assert statement["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    eight = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
             "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListQueueTags"]  # fmt: skip
    too_many = code(sqs.add_permission, QueueUrl=url, Label="two",
                    AWSAccountIds=["111122223333"], Actions=eight)  # fmt: skip
    assert too_many == (403, "OverLimit")
    none = code(sqs.add_permission, QueueUrl=url, Label="two", AWSAccountIds=["111122223333"],
                Actions=[])  # fmt: skip
    assert none == (400, "MissingParameter")

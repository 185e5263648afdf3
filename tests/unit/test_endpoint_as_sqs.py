"""Where the endpoint answers as Amazon SQS does and the Python API keeps its own stricter rule:
a visibility change through an older handle of a message still in flight, as many messages of
one FIFO group as a receive can take, a FIFO receive at the in-flight limit, a FIFO batch entry without a deduplication id, a message
over maxReceiveCount moved at the receive that finds it, empty tag edits, AddPermission's policy,
a receive whose client went away.
boto3 against a real endpoint over a native broker, in this process, on a fake clock (no JVM)."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from sparkqueue import Broker, Queue
from sparkqueue.endpoint import SqsEndpoint
from sparkqueue.errors import TransactionConflict
from sparkqueue.limits import IN_FLIGHT_LIMITS
from tests.raw_http import capture, payload_hash, request_bytes, sqs_client
from tests.unit.endpoint_stub import KEYS


@pytest.fixture
def served(tmp_path, clock):
    """The endpoint over a native broker on a fake clock, and boto3's client of it."""
    broker = Broker(None, str(tmp_path / "root"), clock=clock)
    with SqsEndpoint(broker, port=0, access_keys=KEYS, redrive_every=0) as endpoint:
        yield endpoint, sqs_client(endpoint.url)


@pytest.fixture
def sqs(served):
    return served[1]


def code(call, **params) -> tuple[int, str]:
    with pytest.raises(ClientError) as error:
        call(**params)
    response = error.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def arn_of(sqs, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


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


def test_a_fifo_queue_at_its_in_flight_limit_answers_with_no_messages(sqs, monkeypatch):
    """SQS answers a FIFO receive at the in-flight limit with nothing and no error (a standard
    queue's short poll gets OverLimit); a delete makes room again."""
    monkeypatch.setitem(IN_FLIGHT_LIMITS, True, 3)
    url = fifo(sqs, "full.fifo", ContentBasedDeduplication="true")
    for i in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i}")
    held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(held) == 3
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=held[0]["ReceiptHandle"])
    [more] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert more["Body"] not in {m["Body"] for m in held}


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
    source = ["DeadLetterQueueSourceArn"]
    [moved] = sqs.receive_message(QueueUrl=dead, MessageSystemAttributeNames=source)["Messages"]
    assert (moved["MessageId"], moved["Body"]) == (poison["MessageId"], "poison")
    assert moved["Attributes"] == {"DeadLetterQueueSourceArn": arn_of(sqs, url)}


def test_a_message_moved_by_the_redrive_pass_names_its_source_and_one_moved_back_does_not(
    served, clock
):
    endpoint, sqs = served
    dead = sqs.create_queue(QueueName="dead")["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": arn_of(sqs, dead), "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=5)
    clock.advance(6)
    assert endpoint.service.broker.redrive().moved_to_dead_letter == 1  # the pass, not a receive
    [moved] = sqs.receive_message(
        QueueUrl=dead, VisibilityTimeout=0, MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(sqs, url)
    [without] = sqs.receive_message(QueueUrl=dead, VisibilityTimeout=0)["Messages"]
    assert "Attributes" not in without  # only when asked for

    sqs.start_message_move_task(SourceArn=arn_of(sqs, dead))
    while (
        sqs.list_message_move_tasks(SourceArn=arn_of(sqs, dead))["Results"][0]["Status"]
        == "RUNNING"
    ):
        time.sleep(0.05)
    [back] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
    assert back["Body"] == "poison" and "DeadLetterQueueSourceArn" not in back["Attributes"]


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


def _receive_and_leave(endpoint, url: str, wait: int, *, stay: float, js: bool = False) -> None:
    """A client's ReceiveMessage (signed, as boto3 sends it, or as the JavaScript SDK does:
    lower-case names and the payload's hash) on a connection it closes after `stay` seconds
    without reading the answer: a long poll given up, a client killed."""
    hook = payload_hash if js else None
    asked = capture(
        endpoint.url, "receive_message", before_sign=hook, QueueUrl=url, WaitTimeSeconds=wait
    )
    fields = [(k.lower(), v) for k, v in asked.fields] if js else asked.fields
    parts = urlsplit(endpoint.url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(request_bytes(asked.method, asked.path, fields, asked.body))
        time.sleep(stay)


def test_a_long_poll_whose_client_left_claims_nothing(served, clock):
    """SQS hands a message to a client that is there to take it: a long poll whose client
    closed its connection stops at its next look, before claiming what arrived."""
    endpoint, sqs = served
    url = sqs.create_queue(QueueName="polled")["QueueUrl"]
    _receive_and_leave(endpoint, url, wait=20, stay=0.5)  # the poll waits; then the client leaves
    sqs.send_message(QueueUrl=url, MessageBody="after the client left")  # wakes the poll
    time.sleep(0.5)  # the poll's look (it would have claimed the message for nobody)
    [message] = sqs.receive_message(
        QueueUrl=url, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"


@pytest.mark.parametrize("js", [False, True], ids=["boto3", "javascript"])
def test_messages_received_for_a_client_that_left_are_given_back(served, clock, js):
    """The client closed its connection while its receive claimed: the messages its answer
    held are visible again at once (their receive counted, as SQS counts a lost answer's),
    not hidden for the visibility timeout."""
    endpoint, sqs = served
    url = sqs.create_queue(QueueName="left", Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="for nobody")
    _receive_and_leave(endpoint, url, wait=0, stay=0, js=js)  # sent, the connection closed
    queue, deadline = endpoint.service.broker.get_queue("left"), time.monotonic() + 10
    while not any(shown["receive_count"] for shown in queue.peek()):  # received, given back
        assert time.monotonic() < deadline, "the message was not given back"
        time.sleep(0.05)
    [message] = sqs.receive_message(
        QueueUrl=url, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert message["Body"] == "for nobody"
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_second_purge_within_a_minute_is_refused_as_sqs_refuses_it(sqs, clock):
    url = sqs.create_queue(QueueName="purged")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="first")
    sqs.purge_queue(QueueUrl=url)
    sqs.send_message(QueueUrl=url, MessageBody="second")
    with pytest.raises(ClientError) as error:
        sqs.purge_queue(QueueUrl=url)
    answer = error.value.response
    assert (answer["ResponseMetadata"]["HTTPStatusCode"], answer["Error"]["Code"]) == (
        403,
        "AWS.SimpleQueueService.PurgeQueueInProgress",
    )
    assert answer["Error"]["Message"] == (
        "Only one PurgeQueue operation on purged is allowed every 60 seconds."
    )
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["second"]
    clock.advance(60)
    sqs.purge_queue(QueueUrl=url)  # a minute later
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    sqs.purge_queue(QueueUrl=other)  # each queue its own minute


def test_a_purge_that_failed_counts_as_none_and_regions_purge_apart(served, sqs, monkeypatch):
    endpoint = served[0]
    url = sqs.create_queue(QueueName="purged")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")

    def fails(self) -> int:
        raise TransactionConflict("the purge kept conflicting")

    with monkeypatch.context() as patch:
        patch.setattr(Queue, "purge", fails)
        with pytest.raises(ClientError) as error:
            sqs.purge_queue(QueueUrl=url)
        assert error.value.response["Error"]["Code"] == "ServiceUnavailable"
    sqs.purge_queue(QueueUrl=url)  # the failed one did not count
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    west = sqs_client(endpoint.url, region_name="us-west-1")
    west_url = west.create_queue(QueueName="purged")["QueueUrl"]  # same name, another region
    west.send_message(QueueUrl=west_url, MessageBody="west")
    west.purge_queue(QueueUrl=west_url)
    assert "Messages" not in west.receive_message(QueueUrl=west_url)
    sqs.delete_queue(QueueUrl=url)
    again = sqs.create_queue(QueueName="purged")["QueueUrl"]  # a new queue of that name
    sqs.purge_queue(QueueUrl=again)

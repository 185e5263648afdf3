"""The endpoint's pure parts: SQS's digests, both protocols' reading and writing, SigV4 checks,
queue attributes in SQS's spelling, and the long-poll coordination (real threads, no JVM)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sparkqueue.attributes import takes_dead_letters_from
from sparkqueue.endpoint import settings, wire
from sparkqueue.endpoint.auth import AccessKeys, check_signature
from sparkqueue.endpoint.digest import TypedValue, md5_of_attributes, md5_of_body
from sparkqueue.endpoint.faults import SqsFault
from sparkqueue.endpoint.longpoll import LongPolls
from sparkqueue.endpoint.naming import Naming
from sparkqueue.endpoint.transport import Headers
from sparkqueue.errors import InvalidParameterValue

NUMBER = TypedValue("Number.float", "4563442423554324324264524243.32543234")
BINARY = TypedValue("Binary", b"Hello binary world!")


def test_attribute_digests_match_the_published_vectors():
    # the test vectors of the npm package aws-md5-of-message-attributes (checked against SQS)
    assert md5_of_attributes({"attribName1": TypedValue("String", "attribValue 1")}) == (
        "19e27d4e946b072f3f58da80d94fd778"
    )
    assert (
        md5_of_attributes({"customNumberTypeAttrib": NUMBER}) == "9fe1b90bbd9965bdf77bac517c7d2495"
    )
    assert md5_of_attributes({"binaryAttribute": BINARY}) == "31a92b15d92f8db860eda32aceb656c3"
    every = {
        "attribName1": TypedValue("String", "attribValue 1"),
        "customNumberTypeAttrib": NUMBER,
        "binaryAttribute": BINARY,
    }
    assert md5_of_attributes(every) == "c932db14a896c663f83c260297d594ff"
    assert md5_of_attributes({}) is None
    assert md5_of_body("hello") == "5d41402abc4b2a76b9719d911017c592"


def test_query_forms_become_the_json_shape():
    form = (
        "Action=SendMessageBatch&QueueUrl=http%3A%2F%2Fh%2F000000000000%2Fq"
        "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one"
        "&SendMessageBatchRequestEntry.1.DelaySeconds=5"
        "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=n"
        "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=Number"
        "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=7"
        "&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two"
        "&SendMessageBatchRequestEntry.2.MessageAttribute.1.Name=raw"
        "&SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType=Binary"
        "&SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.BinaryValue=AAE%3D"
    )
    call = wire.decode(None, form.encode())
    assert call.action == "SendMessageBatch" and call.protocol == "query"
    assert call.params == {
        "QueueUrl": "http://h/000000000000/q",
        "Entries": [
            {"Id": "a", "MessageBody": "one", "DelaySeconds": 5,
             "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "7"}}},
            {"Id": "b", "MessageBody": "two",
             "MessageAttributes": {"raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}}},
        ],
    }  # fmt: skip
    tags = wire.decode(None, b"Action=TagQueue&QueueUrl=u&Tag.1.Key=team&Tag.1.Value=data")
    assert tags.params == {"QueueUrl": "u", "Tags": {"team": "data"}}
    names = wire.decode(
        None, b"Action=ReceiveMessage&QueueUrl=u&AttributeName.1=All&MaxNumberOfMessages=3"
    )
    assert names.params == {"QueueUrl": "u", "AttributeNames": ["All"], "MaxNumberOfMessages": 3}


def test_json_bodies_are_checked_against_the_model():
    call = wire.decode(
        "AmazonSQS.ChangeMessageVisibility",
        b'{"QueueUrl": "u", "ReceiptHandle": "h", "VisibilityTimeout": 9}',
    )
    assert call.params == {"QueueUrl": "u", "ReceiptHandle": "h", "VisibilityTimeout": 9}
    for target, body, name in (
        ("AmazonSQS.CreateQueue", b"{oops", "SerializationException"),
        ("AmazonSQS.CreateQueue", b'{"QueueName": 1}', "SerializationException"),
        ("AmazonSQS.ReceiveMessage", b'{"QueueUrl": "u", "MaxNumberOfMessages": true}', "SerializationException"),
        ("AmazonSQS.Teleport", b"{}", "InvalidAction"),
        ("Other.CreateQueue", b"{}", "InvalidAction"),
    ):  # fmt: skip
        with pytest.raises(SqsFault) as fault:
            wire.decode(target, body)
        assert fault.value.kind.name == name


def test_results_and_faults_in_both_protocols():
    call = wire.decode(None, b"Action=ReceiveMessage&QueueUrl=u")
    message = {"MessageId": "m", "ReceiptHandle": "r", "MD5OfBody": "d", "Body": "a\r\n<b>&",
               "Attributes": {"SentTimestamp": "1"},
               "MessageAttributes": {"x": {"DataType": "Binary", "BinaryValue": b"\x00"}}}  # fmt: skip
    content_type, body = wire.encode_result(call, {"Messages": [message]}, "rid")
    assert content_type == wire.XML_CONTENT_TYPE
    ns = {"sqs": wire.XML_NAMESPACE}
    root = ElementTree.fromstring(body)
    node = root.find("sqs:ReceiveMessageResult/sqs:Message", ns)
    assert node.find("sqs:Body", ns).text == "a\r\n<b>&"  # the carriage return survives parsing
    assert node.find("sqs:Attribute/sqs:Name", ns).text == "SentTimestamp"
    assert node.find("sqs:MessageAttribute/sqs:Value/sqs:BinaryValue", ns).text == "AA=="
    assert root.find("sqs:ResponseMetadata/sqs:RequestId", ns).text == "rid"
    headers, body = wire.encode_fault(SqsFault("QueueDoesNotExist", "gone"), "json", "rid")
    assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert json.loads(body) == {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "gone"}
    _, body = wire.encode_fault(SqsFault("ServiceUnavailable", "busy"), "query", "rid")
    error = ElementTree.fromstring(body).find("sqs:Error", ns)
    assert [error.find(f"sqs:{t}", ns).text for t in ("Type", "Code")] == [
        "Receiver",
        "ServiceUnavailable",
    ]


def signed(secret: str = "s3cret", *, when: datetime | None = None, body: bytes = b"{}"):
    request = AWSRequest(method="POST", url="http://127.0.0.1:9324/", data=body,
                         headers={"X-Amz-Target": "AmazonSQS.ListQueues", "Host": "127.0.0.1:9324"})  # fmt: skip
    SigV4Auth(Credentials("key1", secret), "sqs", "eu-west-1").add_auth(request)
    return Headers.of(request.headers.items())


def test_signatures_are_checked_with_the_configured_keys():
    keys = AccessKeys.parse("key1:s3cret, key2:other")
    now = datetime.now(UTC)
    url = "http://127.0.0.1:9324/"
    assert check_signature(keys, "POST", url, signed(), b"{}", now) == "key1"
    assert check_signature(AccessKeys({}), "POST", url, Headers.of([]), b"", now) is None
    cases = [
        (signed("wrong"), b"{}", now, "SignatureDoesNotMatch"),
        (signed(), b'{"tampered": 1}', now, "SignatureDoesNotMatch"),
        (Headers.of([]), b"{}", now, "MissingAuthenticationToken"),
        (Headers.of([("Authorization", "Basic abc")]), b"{}", now, "IncompleteSignature"),
        (signed(), b"{}", now + timedelta(minutes=16), "RequestExpired"),
    ]
    for headers, body, at, name in cases:
        with pytest.raises(SqsFault) as fault:
            check_signature(keys, "POST", url, headers, body, at)
        assert fault.value.kind.name == name
    with pytest.raises(SqsFault) as fault:
        check_signature(AccessKeys.parse("other:x"), "POST", url, signed(), b"{}", now)
    assert fault.value.kind.name == "InvalidClientTokenId"
    for text in ("nocolon", "k:", "bad key:x"):
        with pytest.raises(InvalidParameterValue):
            AccessKeys.parse(text)


def test_queue_attributes_in_sqs_spelling():
    naming = Naming()
    arn = naming.arn("dlq")
    keywords = settings.to_keywords(
        {"VisibilityTimeout": "60", "FifoQueue": "false",
         "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "4"})},
        naming,
        fifo=False,
    )  # fmt: skip
    assert keywords == {"visibility_timeout": 60, "fifo": False, "dead_letter_queue": "dlq",
                        "max_receive_count": 4}  # fmt: skip
    for attributes, name in (
        ({"VisibilityTimeout": "-1"}, "InvalidAttributeValue"),
        ({"VisibilityTimeout": "1e3"}, "InvalidAttributeValue"),
        ({"FifoQueue": "yes"}, "InvalidAttributeValue"),
        ({"RedrivePolicy": "{"}, "InvalidAttributeValue"),
        ({"RedriveAllowPolicy": json.dumps({"redrivePermission": "byQueue"})}, "InvalidAttributeValue"),
        ({"DeduplicationScope": "queue"}, "InvalidAttributeName"),  # FIFO only
        ({"Nonsense": "1"}, "InvalidAttributeName"),
    ):  # fmt: skip
        with pytest.raises(SqsFault) as fault:
            settings.to_keywords(attributes, naming, fifo=False)
        assert fault.value.kind.name == name
    policy = settings.to_keywords(
        {
            "RedriveAllowPolicy": json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": [arn]}
            )
        },
        naming,
        fifo=False,
    )["redrive_allow_policy"]
    assert takes_dead_letters_from(policy, "dlq") and not takes_dead_letters_from(policy, "x")
    assert takes_dead_letters_from(None, "x")


class EmptyQueue:
    """Stands in for a Queue that stays empty: counts how often the table is looked at."""

    name = "q"

    def __init__(self) -> None:
        self.looks = 0
        self.lock = threading.Lock()

    def receive(self) -> list:
        with self.lock:
            self.looks += 1
        time.sleep(0.05)  # a read of the table
        return []


def test_waiting_receives_take_turns_at_looking():
    queue, polls = EmptyQueue(), LongPolls(interval=0.5)
    waiters = [
        threading.Thread(target=polls.receive, args=(queue.name, queue.receive, 2))
        for _ in range(20)
    ]
    started = time.monotonic()
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 4
    # 20 first looks, then about one look per interval for all of them together (not 20 per interval)
    assert queue.looks <= 20 + 2 / 0.5 + 2


def test_a_send_wakes_waiting_receives_at_once():
    class Arriving(EmptyQueue):
        def __init__(self) -> None:
            super().__init__()
            self.sent = threading.Event()

        def receive(self) -> list:
            super().receive()
            return ["message"] if self.sent.is_set() else []

    queue, polls = Arriving(), LongPolls(interval=30)  # no periodic look would come in time
    got: list = []
    waiter = threading.Thread(target=lambda: got.extend(polls.receive("q", queue.receive, 20)))
    waiter.start()
    time.sleep(0.3)
    queue.sent.set()
    polls.arrived("q")
    waiter.join(timeout=5)
    assert got == ["message"]

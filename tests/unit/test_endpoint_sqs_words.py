"""The endpoint's errors in SQS's own words (its code and its message, as SQS and its SDKs'
recorded answers give them), since code and tests written against SQS match on the text; the
Python API keeps its own longer sentences. boto3 (JSON protocol) and a plain form POST (query
protocol) against a real endpoint over a native broker (no JVM)."""

from __future__ import annotations

import urllib.parse
import urllib.request
from urllib.error import HTTPError
from xml.etree import ElementTree

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sparkqueue import Broker
from sparkqueue.endpoint import SqsEndpoint
from sparkqueue.errors import InvalidParameterValue, QueueDoesNotExist, ReceiptHandleIsInvalid

NO_QUEUE = "The specified queue does not exist."


@pytest.fixture
def endpoint(tmp_path, clock):
    broker = Broker(None, str(tmp_path / "root"), clock=clock)
    with SqsEndpoint(broker, port=0, redrive_every=0) as served:
        yield served


@pytest.fixture
def sqs(endpoint):
    return boto3.client(
        "sqs",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture
def queue_url(sqs):
    return sqs.create_queue(QueueName="words")["QueueUrl"]


@pytest.fixture
def fifo_url(sqs):
    return sqs.create_queue(QueueName="words.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]


def answer(call, **params) -> tuple[str, str]:
    with pytest.raises(ClientError) as raised:
        call(**params)
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


def test_a_queue_that_is_not_there(sqs, endpoint):
    elsewhere = f"{endpoint.url}/111111111111/words"
    assert answer(sqs.get_queue_url, QueueName="nope") == (
        "AWS.SimpleQueueService.NonExistentQueue",
        NO_QUEUE,
    )
    assert answer(sqs.get_queue_attributes, QueueUrl=f"{endpoint.url}/000000000000/nope")[1] == (
        NO_QUEUE
    )
    assert answer(sqs.delete_queue, QueueUrl=elsewhere)[1] == NO_QUEUE  # another account's


def test_queue_names_and_attributes(sqs, queue_url):
    assert answer(sqs.create_queue, QueueName="bad name!") == (
        "InvalidParameterValue",
        "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
    )
    assert answer(sqs.create_queue, QueueName="r", Attributes={"MessageRetentionPeriod": "1"}) == (
        "InvalidAttributeValue",
        "Invalid value for the parameter MessageRetentionPeriod.",
    )
    assert answer(sqs.create_queue, QueueName="v", Attributes={"VisibilityTimeout ": "1"}) == (
        "InvalidAttributeName",
        "Unknown Attribute VisibilityTimeout .",
    )
    assert answer(sqs.get_queue_attributes, QueueUrl=queue_url, AttributeNames=["nope"]) == (
        "InvalidAttributeName",
        "Unknown Attribute nope.",
    )
    assert sqs.list_queues()["QueueUrls"] == [queue_url]  # nothing was created


def test_messages_and_their_attributes(sqs, queue_url, fifo_url):
    too_long = "x" * 1_048_577
    assert answer(sqs.send_message, QueueUrl=queue_url, MessageBody=too_long) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
    )
    for name, data_type, words in [
        ("öther", "String", "The message attribute name 'öther' is invalid. Attribute name can"
         " contain A-Z, a-z, 0-9, underscore (_), hyphen (-), and period (.) characters."),
        ("when", "Date", "The message attribute 'when' has an invalid message attribute type,"
         " the set of supported type prefixes is Binary, Number, and String."),
    ]:  # fmt: skip
        refused = {name: {"DataType": data_type, "StringValue": "x"}}
        sent = {"QueueUrl": queue_url, "MessageBody": "b", "MessageAttributes": refused}
        assert answer(sqs.send_message, **sent)[1] == words
    delayed = {"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 5}
    assert answer(sqs.send_message, QueueUrl=fifo_url, MessageBody="b", **delayed) == (
        "InvalidParameterValue",
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include parameter"
        " that is not valid for this queue type.",
    )
    assert answer(sqs.send_message, QueueUrl=fifo_url, MessageBody="b") == (
        "MissingParameter",
        "The request must contain the parameter MessageGroupId.",
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


def test_numbers_out_of_range(sqs, queue_url):
    for call, params, name, allowed in [
        (sqs.receive_message, {"MaxNumberOfMessages": 11}, "MaxNumberOfMessages", ">= 1 and <= 10"),
        (sqs.receive_message, {"WaitTimeSeconds": 21}, "WaitTimeSeconds", ">= 0 and <= 20"),
        (
            sqs.receive_message,
            {"VisibilityTimeout": 43201},
            "VisibilityTimeout",
            ">= 0 and <= 43200",
        ),
    ]:
        value = params[name]
        assert answer(call, QueueUrl=queue_url, **params) == (
            "InvalidParameterValue",
            f"Value {value} for parameter {name} is invalid. Reason: {name} must be {allowed}.",
        )
    sqs.send_message(QueueUrl=queue_url, MessageBody="b")
    [message] = sqs.receive_message(QueueUrl=queue_url)["Messages"]
    handle = message["ReceiptHandle"]
    assert answer(
        sqs.change_message_visibility,
        QueueUrl=queue_url,
        ReceiptHandle=handle,
        VisibilityTimeout=-1,
    )[1] == (
        "Value -1 for parameter VisibilityTimeout is invalid. Reason: VisibilityTimeout must be"
        " >= 0 and <= 43200."
    )


def test_batches(sqs, queue_url):
    assert answer(sqs.send_message_batch, QueueUrl=queue_url, Entries=[])[1] == (
        "There should be at least one SendMessageBatchRequestEntry in the request."
    )
    assert answer(sqs.delete_message_batch, QueueUrl=queue_url, Entries=[])[1] == (
        "There should be at least one DeleteMessageBatchRequestEntry in the request."
    )
    twice = [{"Id": "a", "MessageBody": "1"}, {"Id": "a", "MessageBody": "2"}]
    assert answer(sqs.send_message_batch, QueueUrl=queue_url, Entries=twice) == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "Id a repeated.",
    )
    eleven = [{"Id": str(n), "MessageBody": "b"} for n in range(11)]
    assert answer(sqs.send_message_batch, QueueUrl=queue_url, Entries=eleven)[1] == (
        "Maximum number of entries per request are 10. You have sent 11."
    )
    late = [
        {"Id": "ok", "MessageBody": "b"},
        {"Id": "late", "MessageBody": "b", "DelaySeconds": 901},
    ]
    sent = sqs.send_message_batch(QueueUrl=queue_url, Entries=late)
    assert [entry["Id"] for entry in sent["Successful"]] == ["ok"]
    assert sent["Failed"][0]["Message"] == (
        "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and"
        " <= 900."
    )
    failed = sqs.delete_message_batch(
        QueueUrl=queue_url, Entries=[{"Id": "x", "ReceiptHandle": "fake"}]
    )["Failed"]
    assert failed == [
        {
            "Id": "x",
            "SenderFault": True,
            "Code": "ReceiptHandleIsInvalid",
            "Message": 'The input receipt handle "fake" is not a valid receipt handle.',
        }
    ]


def test_handles_permissions_and_tags(sqs, queue_url):
    assert answer(sqs.delete_message, QueueUrl=queue_url, ReceiptHandle="fake") == (
        "ReceiptHandleIsInvalid",
        "The input receipt handle is invalid.",
    )
    grant = {"QueueUrl": queue_url, "AWSAccountIds": ["111111111111"]}
    sqs.add_permission(Label="l", Actions=["SendMessage"], **grant)
    assert answer(sqs.add_permission, Label="l", Actions=["SendMessage"], **grant)[1] == (
        "Value l for parameter Label is invalid. Reason: Already exists."
    )
    assert answer(sqs.add_permission, Label="m", Actions=["RemovePermission"], **grant)[1] == (
        "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the queue"
        " owner is allowed to invoke this action."
    )
    assert answer(sqs.remove_permission, QueueUrl=queue_url, Label="none")[1] == (
        "Value none for parameter Label is invalid. Reason: can't find label on existing policy."
    )
    assert answer(sqs.tag_queue, QueueUrl=queue_url, Tags={}) == (
        "MissingParameter",
        "The request must contain the parameter Tags.",
    )
    many = {f"k{n}": "v" for n in range(51)}
    assert answer(sqs.tag_queue, QueueUrl=queue_url, Tags=many)[1] == (
        "Too many tags added for queue words."
    )
    assert sqs.list_queue_tags(QueueUrl=queue_url).get("Tags") is None


def test_the_query_protocol_carries_the_same_words(endpoint):
    form = b"Action=GetQueueUrl&QueueName=nope&Version=2012-11-05"
    request = urllib.request.Request(
        endpoint.url + "/",
        data=form,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Amz-Date": "20261129T000000Z",
        },
    )
    with pytest.raises(HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    body = raised.value.read().decode()
    assert "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>" in body
    assert f"<Message>{NO_QUEUE}</Message>" in body


def test_a_refused_value_with_control_characters_keeps_the_answer_well_formed(endpoint, sqs):
    """SQS's words echo the refused value; one XML cannot carry is written as \\xNN, so the
    query protocol's answer still parses and says InvalidParameterValue."""
    url = sqs.create_queue(QueueName="echo")["QueueUrl"]
    form = urllib.parse.urlencode(
        {
            "Action": "SendMessage",
            "QueueUrl": url,
            "MessageBody": "b",
            "MessageAttribute.1.Name": "\x01bad",
            "MessageAttribute.1.Value.DataType": "String",
            "MessageAttribute.1.Value.StringValue": "v",
        }
    ).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Amz-Date": "20261129T0Z"}
    with pytest.raises(HTTPError) as raised:
        urllib.request.urlopen(urllib.request.Request(url, data=form, headers=headers), timeout=10)
    error = ElementTree.fromstring(raised.value.read()).find("{*}Error")
    assert error.findtext("{*}Code") == "InvalidParameterValue"
    assert "'\\x01bad' is invalid" in error.findtext("{*}Message")


def test_python_callers_keep_the_longer_sentences(broker):
    """The same errors in Python say what was wrong and what is allowed; `sqs_message` is what
    the endpoint answers."""
    with pytest.raises(QueueDoesNotExist) as missing:
        broker.get_queue("nope")
    assert "nope" in missing.value.message
    assert missing.value.sqs_message == NO_QUEUE
    with pytest.raises(InvalidParameterValue) as named:
        broker.create_queue("bad name!")
    assert "A-Z, a-z, 0-9" in named.value.message
    assert named.value.sqs_message.startswith("Can only include alphanumeric characters")
    queue = broker.create_queue("q")
    with pytest.raises(ReceiptHandleIsInvalid) as handle:
        queue.delete("fake")
    assert "malformed" in handle.value.message
    assert handle.value.sqs_message == "The input receipt handle is invalid."

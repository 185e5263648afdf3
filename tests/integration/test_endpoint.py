"""The SQS endpoint as a real server process, driven by real clients: boto3 over the JSON protocol
(what current SDKs send), boto3 over the query protocol (botocore's own query serializer), the AWS
CLI, and raw HTTP for requests no SDK would send. Every request is signed (SigV4) unless a test
says otherwise."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from sparkqueue import Broker
from tests.integration.sqs_clients import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    json_client,
    query_client,
)

pytestmark = pytest.mark.spark
AWS_CLI = str(Path(sys.executable).with_name("aws"))


@pytest.fixture(scope="module")
def sqs_query(served, tmp_path_factory):
    return query_client(served[1], tmp_path_factory.mktemp("model"))


@pytest.fixture
def name() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return error.value.response["Error"]["Code"]


def attributes_md5(attributes: dict) -> str:
    """SQS's digest of message attributes, written here from its documented definition."""
    digest = hashlib.md5()
    for key in sorted(attributes):
        value = attributes[key]
        for text in (key, value["DataType"]):
            digest.update(struct.pack(">I", len(text.encode())) + text.encode())
        if "BinaryValue" in value:
            raw = value["BinaryValue"]
            digest.update(b"\x02" + struct.pack(">I", len(raw)) + raw)
        else:
            raw = value["StringValue"].encode()
            digest.update(b"\x01" + struct.pack(">I", len(raw)) + raw)
    return digest.hexdigest()


TYPED = {
    "text": {"DataType": "String", "StringValue": "héllo wörld"},
    "price": {"DataType": "Number", "StringValue": "12.50"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffbinary"},
    "trace.id": {"DataType": "String.uuid", "StringValue": "abc-123"},
}


def test_queue_lifecycle_attributes_tags_and_paging(sqs, name):
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert url.endswith(f"/000000000000/{name}")
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url  # nothing named differs
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "46"})
    assert code(error) == "QueueAlreadyExists"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url

    every = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert every["VisibilityTimeout"] == "45" and every["ApproximateNumberOfMessages"] == "0"
    assert every["QueueArn"] == f"arn:aws:sqs:{REGION}:000000000000:{name}"
    assert {"CreatedTimestamp", "LastModifiedTimestamp", "MaximumMessageSize"} <= set(every)
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"DelaySeconds": "2", "ReceiveMessageWaitTimeSeconds": "1"}
    )
    some = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"]
    assert some == {"DelaySeconds": "2"}
    for bad, wanted in (({"DelaySeconds": "901"}, "InvalidAttributeValue"),
                        ({"Colour": "red"}, "InvalidAttributeName"),
                        ({"Policy": "[1]"}, "InvalidAttributeValue")):  # fmt: skip
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=bad)
        assert code(error) == wanted

    sqs.tag_queue(QueueUrl=url, Tags={"team": "data", "env": "test"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "data"}

    for suffix in "abc":
        sqs.create_queue(QueueName=f"{name}-{suffix}")
    first = sqs.list_queues(QueueNamePrefix=f"{name}-", MaxResults=2)
    rest = sqs.list_queues(QueueNamePrefix=f"{name}-", MaxResults=2, NextToken=first["NextToken"])
    assert [u.rsplit("/", 1)[1] for u in first["QueueUrls"] + rest["QueueUrls"]] == [
        f"{name}-a",
        f"{name}-b",
        f"{name}-c",
    ]
    assert "NextToken" not in rest
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as error:
        sqs.get_queue_url(QueueName=name)
    assert code(error) == "AWS.SimpleQueueService.NonExistentQueue"


def test_typed_attributes_digests_and_system_attributes(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    body = "a body with\r\na carriage return"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=TYPED)
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    assert sent["MD5OfMessageAttributes"] == attributes_md5(TYPED)
    got = sqs.receive_message(
        QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"], WaitTimeSeconds=5
    )["Messages"][0]
    assert got["Body"] == body and got["MessageId"] == sent["MessageId"]
    assert got["MessageAttributes"] == TYPED
    assert got["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert got["Attributes"]["ApproximateReceiveCount"] == "1"
    assert abs(int(got["Attributes"]["SentTimestamp"]) / 1000 - time.time()) < 120

    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=got["ReceiptHandle"], VisibilityTimeout=0
    )
    again = sqs.receive_message(
        QueueUrl=url, MessageAttributeNames=["trace.*"], AttributeNames=["ApproximateReceiveCount"]
    )["Messages"][0]
    assert again["MessageAttributes"] == {"trace.id": TYPED["trace.id"]}
    assert again["MD5OfMessageAttributes"] == attributes_md5({"trace.id": TYPED["trace.id"]})
    assert again["Attributes"] == {"ApproximateReceiveCount": "2"}
    # superseded by the second receive: succeeds and deletes nothing, as in SQS
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_batches_report_each_entry(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "good", "MessageBody": "one"},
            {"Id": "bad-char", "MessageBody": "nul \x00 inside"},
            {"Id": "bad-delay", "MessageBody": "two", "DelaySeconds": 901},
            {"Id": "good2", "MessageBody": "three", "MessageAttributes": TYPED},
        ],
    )
    assert sorted(e["Id"] for e in sent["Successful"]) == ["good", "good2"]
    failed = {e["Id"]: e for e in sent["Failed"]}
    assert (
        failed["bad-char"]["Code"] == "InvalidMessageContents" and failed["bad-char"]["SenderFault"]
    )
    assert failed["bad-delay"]["Code"] == "InvalidParameterValue"
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    while len(got) < 2:
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)[
            "Messages"
        ]
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "ReceiptHandle": got[0]["ReceiptHandle"], "VisibilityTimeout": 60},
            {"Id": "b", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 60},
        ],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["a"]
    assert [(e["Id"], e["Code"]) for e in changed["Failed"]] == [("b", "ReceiptHandleIsInvalid")]
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        + [{"Id": "gone", "ReceiptHandle": "2.x.y.z"}],
    )
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["m0", "m1"]
    assert [e["Id"] for e in deleted["Failed"]] == ["gone"]
    for entries, wanted in (
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        ([{"Id": str(i), "MessageBody": "x"} for i in range(11)],
         "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"),
        ([{"Id": "same", "MessageBody": "x"}] * 2, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
        ([{"Id": "no spaces", "MessageBody": "x"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
    ):  # fmt: skip
        with pytest.raises(ClientError) as error:
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert code(error) == wanted
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(3)]
    )
    counted = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counted["Attributes"] == {"ApproximateNumberOfMessages": "3"}
    sqs.purge_queue(QueueUrl=url)
    counted = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counted["Attributes"] == {"ApproximateNumberOfMessages": "0"}


def test_fifo_order_deduplication_and_groups(sqs, name):
    url = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    flags = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["FifoQueue", "ContentBasedDeduplication"]
    )["Attributes"]
    assert flags == {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    first = sqs.send_message(QueueUrl=url, MessageBody="g1-a", MessageGroupId="g1")
    duplicate = sqs.send_message(QueueUrl=url, MessageBody="g1-a", MessageGroupId="g1")
    assert duplicate["MessageId"] == first["MessageId"]
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "b", "MessageBody": "g1-b", "MessageGroupId": "g1"},
            {
                "Id": "c",
                "MessageBody": "g2-a",
                "MessageGroupId": "g2",
                "MessageDeduplicationId": "d",
            },
        ],
    )
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="no group")
    assert code(error) == "MissingParameter"
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])[
        "Messages"
    ]
    bodies = [m["Body"] for m in got]
    assert bodies.index("g1-a") < bodies.index("g1-b") and sorted(bodies) == [
        "g1-a",
        "g1-b",
        "g2-a",
    ]
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"g1", "g2"}
    assert all("SequenceNumber" in m["Attributes"] for m in got)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # both groups are in flight


def test_dead_letters_and_move_tasks(sqs, served, spark, name):
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    assert json.loads(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"][
            "RedrivePolicy"
        ]
    ) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [url]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5)["Messages"]
    # the redrive job, from Spark (or the endpoint's own pass, if it came first)
    Broker(spark, str(served[0])).redrive([name])
    counted = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
    assert counted["Attributes"] == {"ApproximateNumberOfMessages": "1"}
    with pytest.raises(ClientError) as error:  # the source is not a dead-letter queue
        sqs.start_message_move_task(SourceArn=dlq_arn.replace(f"{name}-dlq", name))
    assert code(error) == "InvalidParameterValue"
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    deadline = time.monotonic() + 120
    while (task := sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0])[
        "Status"
    ] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert task["Status"] == "COMPLETED" and task["ApproximateNumberOfMessagesMoved"] == 1
    with pytest.raises(ClientError) as error:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert code(error) == "ResourceNotFoundException"
    back = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in back] == ["poison"]
    denied = sqs.create_queue(
        QueueName=f"{name}-closed",
        Attributes={"RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})},
    )["QueueUrl"]
    closed_arn = dlq_arn.replace(f"{name}-dlq", f"{name}-closed")
    with pytest.raises(ClientError) as error:
        sqs.set_queue_attributes(
            QueueUrl=url,
            Attributes={
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": closed_arn, "maxReceiveCount": 3}
                )
            },
        )
    assert code(error) == "InvalidParameterValue"
    assert denied


def test_long_polling_wakes_on_a_send_and_ends_on_time(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
    assert 2 <= time.monotonic() - started < 6
    got: list = []
    waiters = [
        threading.Thread(
            target=lambda: got.extend(
                sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", [])
            )
        )
        for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(1)  # the receives are parked
    sent_at = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="wake up")
    while not got and time.monotonic() - sent_at < 15:  # any one of the three takes it
        time.sleep(0.05)
    assert [m["Body"] for m in got] == ["wake up"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "a"}, {"Id": "2", "MessageBody": "b"}]
    )
    for waiter in waiters:
        waiter.join(timeout=25)
    assert sorted(m["Body"] for m in got) == ["a", "b", "wake up"]


def test_query_protocol(sqs_query, sqs, name):
    url = sqs_query.create_queue(
        QueueName=name, Attributes={"VisibilityTimeout": "40"}, tags={"k": "v"}
    )["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"
    ] == {"VisibilityTimeout": "40"}
    assert sqs_query.list_queue_tags(QueueUrl=url)["Tags"] == {"k": "v"}
    assert url in sqs_query.list_queues(QueueNamePrefix=name)["QueueUrls"]
    body = '<xml> & "quotes"\r\n'
    sent = sqs_query.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=TYPED)
    assert sent["MD5OfMessageAttributes"] == attributes_md5(TYPED)
    got = sqs_query.receive_message(
        QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"], WaitTimeSeconds=5
    )["Messages"]
    assert got[0]["Body"] == body and got[0]["MessageAttributes"] == TYPED
    assert got[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    result = sqs_query.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "ReceiptHandle": got[0]["ReceiptHandle"]},
            {"Id": "bad", "ReceiptHandle": "nope"},
        ],
    )
    assert [e["Id"] for e in result["Successful"]] == ["ok"]
    assert [(e["Id"], e["Code"]) for e in result["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    with pytest.raises(ClientError) as error:
        sqs_query.get_queue_url(QueueName=f"{name}-missing")
    assert code(error) == "AWS.SimpleQueueService.NonExistentQueue"
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_aws_cli(served, name):
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }

    def aws(*args: str) -> dict:
        done = subprocess.run(
            [AWS_CLI, "sqs", *args, "--endpoint-url", served[1], "--output", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    url = aws("create-queue", "--queue-name", name)["QueueUrl"]
    aws("send-message", "--queue-url", url, "--message-body", "from the cli")
    got = aws("receive-message", "--queue-url", url, "--wait-time-seconds", "5")["Messages"]
    assert [m["Body"] for m in got] == ["from the cli"]
    aws("delete-message", "--queue-url", url, "--receipt-handle", got[0]["ReceiptHandle"])
    counts = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")[
        "Attributes"
    ]
    assert (
        counts["ApproximateNumberOfMessages"] == "0"
        and counts["ApproximateNumberOfMessagesNotVisible"] == "0"
    )
    assert url in aws("list-queues", "--queue-name-prefix", name)["QueueUrls"]


def test_eight_clients_lose_nothing_and_deliver_once(served, name):
    clients = [json_client(served[1]) for _ in range(8)]
    url = clients[0].create_queue(QueueName=name, Attributes={"VisibilityTimeout": "120"})[
        "QueueUrl"
    ]
    per_client, received, errors = 6, [], []
    lock = threading.Lock()

    def work(index: int) -> None:
        client = clients[index]
        try:
            client.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": f"{index}-{i}"} for i in range(per_client)],
            )
            empty = 0
            while empty < 3:
                got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=4, WaitTimeSeconds=1)
                messages = got.get("Messages", [])
                empty = 0 if messages else empty + 1
                with lock:
                    received.extend(m["Body"] for m in messages)
                for message in messages:
                    client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        except Exception as error:  # reported below, with the thread that met it
            errors.append((index, error))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors
    assert sorted(received) == sorted(f"{c}-{i}" for c in range(8) for i in range(per_client))


def test_spark_and_sqs_clients_share_messages(sqs, served, spark, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(
        QueueUrl=url, MessageBody="from boto3", MessageAttributes={"n": TYPED["price"]}
    )
    queue = Broker(spark, str(served[0])).get_queue(name)
    rows = queue.receive_df(10).collect()
    assert [(r.body, r.attributes, r.attribute_types) for r in rows] == [
        ("from boto3", {"n": "12.50"}, {"n": "Number"})
    ]
    queue.delete_batch([r.receipt_handle for r in rows])
    queue.send(
        "from spark", attributes={"plain": "text", "n": "7"}, attribute_types={"n": "Number"}
    )
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=5)[
        "Messages"
    ]
    assert [(m["Body"], m["MessageAttributes"]) for m in got] == [
        (
            "from spark",
            {
                "plain": {"DataType": "String", "StringValue": "text"},
                "n": {"DataType": "Number", "StringValue": "7"},
            },
        )
    ]
    assert got[0]["MD5OfMessageAttributes"] == attributes_md5(got[0]["MessageAttributes"])

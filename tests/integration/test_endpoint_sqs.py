"""What outside SQS clients (an SQS conformance suite on boto3, the AWS SDK for Java v2, Celery's
SQS transport) rely on, each as Amazon SQS documents it: size limits and error codes, superseded
receipt handles, bare queue names, FIFO sequence numbers, trace headers, the queue attributes
clients set, queue URLs of other regions, the scheduled redrive, and a fast GetQueueUrl."""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sparkqueue import Broker
from sparkqueue.limits import MAX_MESSAGE_BYTES
from tests.integration.sqs_clients import endpoint, json_client
from tests.unit.test_endpoint_sqs_rules import OUT_OF_RANGE

pytestmark = pytest.mark.spark
OTHER_REGION = "eu-west-1"


@pytest.fixture
def name() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """A second endpoint, pinned to a region and running the redrive pass every second."""
    folder = tmp_path_factory.mktemp("pinned")
    extra = ["--region", OTHER_REGION, "--redrive-every", "1"]
    with endpoint(folder / "root", folder / "serve.log", extra=extra) as url:
        yield folder / "root", url


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return error.value.response["Error"]["Code"]


def status(error: pytest.ExceptionInfo[ClientError]) -> int:
    return error.value.response["ResponseMetadata"]["HTTPStatusCode"]


def fails(call, *args, **kwargs) -> ClientError:
    with pytest.raises(ClientError) as error:
        call(*args, **kwargs)
    return error.value


# -- 9: limits and codes ---------------------------------------------------------------------------


def test_message_size_is_sqs_current_limit(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    size = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])
    assert (
        size["Attributes"]
        == {"MaximumMessageSize": str(MAX_MESSAGE_BYTES)}
        == {"MaximumMessageSize": "1048576"}
    )
    sqs.send_message(QueueUrl=url, MessageBody="x" * 300_000)
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x" * (MAX_MESSAGE_BYTES + 1))
    assert (code(error), status(error)) == ("InvalidParameterValue", 400)
    entries = [{"Id": str(i), "MessageBody": "y" * 110_000} for i in range(10)]
    with pytest.raises(ClientError) as error:  # 1.1 MB together, each one small enough
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert (code(error), status(error)) == ("AWS.SimpleQueueService.BatchRequestTooLong", 400)
    counted = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counted["Attributes"] == {"ApproximateNumberOfMessages": "1"}
    big = sqs.create_queue(QueueName=f"{name}-big", Attributes={"MaximumMessageSize": "1048576"})
    assert big["QueueUrl"].endswith(f"{name}-big")


@pytest.mark.parametrize("attributes", OUT_OF_RANGE)
def test_create_queue_out_of_range_is_invalid_attribute_value(sqs, name, attributes):
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName=name, Attributes=attributes)
    assert (code(error), status(error)) == ("InvalidAttributeValue", 400)
    assert not sqs.list_queues(QueueNamePrefix=name).get("QueueUrls")


def test_fifo_send_errors_are_sqs_codes(sqs, name):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g")
    assert code(error) == "InvalidParameterValue"
    assert "ContentBasedDeduplication" in error.value.response["Error"]["Message"]
    entries = [
        {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "1"},
        {"Id": "nogroup", "MessageBody": "b", "MessageDeduplicationId": "2"},
    ]
    with pytest.raises(ClientError) as error:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert (code(error), status(error)) == ("MissingParameter", 400)
    counted = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counted["Attributes"] == {"ApproximateNumberOfMessages": "0"}


def test_error_texts_never_disclose_the_root(sqs, served, name):
    root = str(served[0])
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    missing = url.replace(name, f"{name}-missing")
    calls = [
        (sqs.get_queue_url, {"QueueName": f"{name}-missing"}),
        (sqs.delete_queue, {"QueueUrl": missing}),
        (sqs.send_message, {"QueueUrl": missing, "MessageBody": "x"}),
        (sqs.receive_message, {"QueueUrl": missing}),
        (sqs.get_queue_attributes, {"QueueUrl": missing, "AttributeNames": ["All"]}),
        (sqs.purge_queue, {"QueueUrl": missing}),
        (sqs.list_queue_tags, {"QueueUrl": missing}),
        (sqs.delete_message, {"QueueUrl": url, "ReceiptHandle": "0.x.y.z"}),
        (sqs.start_message_move_task, {"SourceArn": f"arn:aws:sqs:us-east-1:000000000000:{name}-x"}),
        (sqs.set_queue_attributes, {"QueueUrl": url, "Attributes": {"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": f"arn:aws:sqs:us-east-1:000000000000:{name}-x",
             "maxReceiveCount": 2})}}),
    ]  # fmt: skip
    for call, params in calls:
        message = fails(call, **params).response["Error"]["Message"]
        assert root not in message and "file:" not in message, (call, message)


# -- 10: behaviours ---------------------------------------------------------------------------------


def test_fifo_takes_an_explicit_zero_delay(sqs, name):
    url = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", DelaySeconds=0)
    sent = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "b", "MessageBody": "b", "MessageGroupId": "g",
                                "DelaySeconds": 0}],
    )  # fmt: skip
    assert [e["Id"] for e in sent["Successful"]] == ["b"] and not sent.get("Failed")
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="g", DelaySeconds=5)
    assert code(error) == "InvalidParameterValue"


def test_superseded_handles_delete_quietly_and_forged_ones_fail(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5)["Messages"]
    second = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60, WaitTimeSeconds=5)["Messages"]
    old, current = first[0]["ReceiptHandle"], second[0]["ReceiptHandle"]
    forged = current[:-1] + ("0" if current[-1] != "0" else "1")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old)  # succeeds, deletes nothing
    for handle in (forged, "not-a-handle"):
        with pytest.raises(ClientError) as error:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        assert code(error) == "ReceiptHandleIsInvalid"
    # an older handle of a message in flight changes its latest receive, as in SQS
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=60)
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "old", "ReceiptHandle": old, "VisibilityTimeout": 60},
            {"Id": "forged", "ReceiptHandle": forged, "VisibilityTimeout": 5},
        ],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["old"]
    assert [(e["Id"], e["Code"]) for e in changed["Failed"]] == [
        ("forged", "ReceiptHandleIsInvalid")
    ]
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "old", "ReceiptHandle": old}, {"Id": "forged", "ReceiptHandle": forged}],
    )
    assert [e["Id"] for e in deleted["Successful"]] == ["old"]
    assert [(e["Id"], e["Code"]) for e in deleted["Failed"]] == [
        ("forged", "ReceiptHandleIsInvalid")
    ]
    counted = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )  # the message is still there, held by the current handle
    assert counted["Attributes"] == {"ApproximateNumberOfMessagesNotVisible": "1"}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=current)


def test_a_bare_queue_name_is_a_queue_url(sqs, name):
    sqs.create_queue(QueueName=name)
    sqs.send_message(QueueUrl=name, MessageBody="by name")
    got = sqs.receive_message(QueueUrl=name, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["by name"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=f"{name}-missing", MessageBody="x")


def test_get_queue_attributes_without_names_returns_none(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)


def test_scheduled_redrive_moves_exhausted_messages_while_serving(pinned, name):
    sqs = json_client(pinned[1], region=OTHER_REGION)
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5)["Messages"]
    # The endpoint's own pass (no redrive job): its first starts a JVM in the server, then
    # passes every queue of the session's endpoint (40-50 s on a busy 2-core machine).
    deadline = time.monotonic() + 180
    moved: list = []
    while not moved and time.monotonic() < deadline:
        moved = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=2).get("Messages", [])
    assert [m["Body"] for m in moved] == ["poison"]


# -- 11: what SDKs and frameworks use --------------------------------------------------------------


def test_fifo_sends_return_the_sequence_number_receivers_see(sqs, name):
    url = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g")
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": b, "MessageBody": b, "MessageGroupId": "g"} for b in ("b", "c")],
    )["Successful"]
    again = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g")  # a duplicate
    sent = [first["SequenceNumber"], *(e["SequenceNumber"] for e in batch)]
    assert all(s.isdigit() for s in sent)
    assert [int(s) for s in sent] == sorted(int(s) for s in sent) and len(set(sent)) == 3
    assert again["SequenceNumber"] == first["SequenceNumber"]
    got = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["SequenceNumber"], WaitTimeSeconds=5
    )["Messages"]
    assert [(m["Body"], m["Attributes"]["SequenceNumber"]) for m in got] == list(
        zip("abc", sent, strict=True)
    )
    plain = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert "SequenceNumber" not in sqs.send_message(QueueUrl=plain, MessageBody="x")


def test_trace_header_is_a_system_attribute(sqs, name):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="traced",
        MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
        MessageSystemAttributes=system,
    )
    assert len(sent["MD5OfMessageSystemAttributes"]) == 32
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "1", "MessageBody": "traced too", "MessageSystemAttributes": system}],
    )
    got = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5, MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["AWSTraceHeader"],
    )["Messages"]  # fmt: skip
    while len(got) < 2:
        got += sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, MessageAttributeNames=["All"],
                                   MessageSystemAttributeNames=["AWSTraceHeader"])["Messages"]  # fmt: skip
    assert all(m["Attributes"] == {"AWSTraceHeader": trace} for m in got)
    assert {m["Body"]: m.get("MessageAttributes") for m in got} == {
        "traced": {"k": {"DataType": "String", "StringValue": "v"}},
        "traced too": None,
    }
    for message in got:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    every = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=5
    )["Messages"]
    assert all(m["Attributes"]["AWSTraceHeader"] == trace for m in every)
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes={
            "AWSTraceHeader": {"DataType": "Number", "StringValue": "1"}})  # fmt: skip
    assert code(error) == "InvalidParameterValue"


def test_policy_encryption_and_throughput_attributes(sqs, name):
    url = sqs.create_queue(QueueName=name, Attributes={"SqsManagedSseEnabled": "true"})["QueueUrl"]
    arn = f"arn:aws:sqs:us-east-1:000000000000:{name}"
    policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "s1", "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
         "Resource": arn}]})  # fmt: skip
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={"Policy": policy, "KmsMasterKeyId": "alias/aws/sqs",
                    "KmsDataKeyReusePeriodSeconds": "600"},
    )  # fmt: skip
    every = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert json.loads(every["Policy"]) == json.loads(policy)
    assert every["KmsMasterKeyId"] == "alias/aws/sqs"
    assert every["KmsDataKeyReusePeriodSeconds"] == "600"
    assert every["SqsManagedSseEnabled"] == "true"
    for bad in ({"KmsDataKeyReusePeriodSeconds": "59"}, {"Policy": "not json"},
                {"SqsManagedSseEnabled": "yes"}):  # fmt: skip
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=bad)
        assert code(error) == "InvalidAttributeValue", bad
    for fifo_only in ({"DeduplicationScope": "queue"}, {"FifoThroughputLimit": "perQueue"}):
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=fifo_only)
        assert code(error) == "InvalidAttributeName", fifo_only

    sqs.add_permission(QueueUrl=url, Label="readers", AWSAccountIds=["111122223333"],
                       Actions=["ReceiveMessage", "DeleteMessage"])  # fmt: skip
    document = json.loads(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    )
    assert [s["Sid"] for s in document["Statement"]] == ["s1", "readers"]
    added = document["Statement"][1]
    assert added["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    assert added["Action"] == ["SQS:ReceiveMessage", "SQS:DeleteMessage"]
    with pytest.raises(ClientError) as error:  # labels are unique
        sqs.add_permission(QueueUrl=url, Label="readers", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])  # fmt: skip
    assert code(error) == "InvalidParameterValue"
    sqs.remove_permission(QueueUrl=url, Label="readers")
    with pytest.raises(ClientError) as error:
        sqs.remove_permission(QueueUrl=url, Label="readers")
    assert code(error) == "InvalidParameterValue"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert (
        "Policy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    )

    fifo = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={"FifoQueue": "true", "DeduplicationScope": "messageGroup",
                    "FifoThroughputLimit": "perMessageGroupId"},
    )["QueueUrl"]  # fmt: skip
    wanted = ["DeduplicationScope", "FifoThroughputLimit"]
    assert sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=wanted)["Attributes"] == {
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
    }
    with pytest.raises(ClientError) as error:
        sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoThroughputLimit": "fast"})
    assert code(error) == "InvalidAttributeValue"


def test_queue_urls_of_each_region(sqs, pinned, name):
    sqs.create_queue(QueueName=name)
    home_style = f"https://sqs.us-east-1.amazonaws.com/000000000000/{name}"
    sqs.send_message(QueueUrl=home_style, MessageBody="its own region")
    aws_style = f"https://sqs.{OTHER_REGION}.amazonaws.com/000000000000/{name}"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):  # regions apart: another's URL
        sqs.send_message(QueueUrl=aws_style, MessageBody="elsewhere")
    with pytest.raises(ClientError) as error:  # a pinned endpoint takes its own region's only
        json_client(pinned[1]).create_queue(QueueName=name)
    assert (code(error), status(error)) == ("SignatureDoesNotMatch", 403)
    pinned_sqs = json_client(pinned[1], region=OTHER_REGION)
    url = pinned_sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = pinned_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    assert arn["Attributes"]["QueueArn"] == f"arn:aws:sqs:{OTHER_REGION}:000000000000:{name}"
    pinned_sqs.send_message(QueueUrl=aws_style, MessageBody="its own region")
    for other in (
        f"https://sqs.us-east-1.amazonaws.com/000000000000/{name}",
        f"https://us-west-2.queue.amazonaws.com/000000000000/{name}",
    ):
        with pytest.raises(pinned_sqs.exceptions.QueueDoesNotExist):
            pinned_sqs.send_message(QueueUrl=other, MessageBody="elsewhere")


# -- 12: speed --------------------------------------------------------------------------------------


def test_get_queue_url_is_fast_under_load_and_forgets_deleted_queues(sqs, served, spark, name):
    sqs.create_queue(QueueName=name)
    busy = sqs.create_queue(QueueName=f"{name}-busy")["QueueUrl"]
    sqs.get_queue_url(QueueName=name)
    stop = threading.Event()

    def load() -> None:  # what a client notices GetQueueUrl beside: sends and receives
        client = json_client(served[1])
        while not stop.is_set():
            client.send_message(QueueUrl=busy, MessageBody="load")
            for m in client.receive_message(QueueUrl=busy).get("Messages", []):
                client.delete_message(QueueUrl=busy, ReceiptHandle=m["ReceiptHandle"])

    workers = [threading.Thread(target=load, daemon=True) for _ in range(4)]
    for worker in workers:
        worker.start()
    time.sleep(2)
    took = []
    try:
        for _ in range(50):
            started = time.perf_counter()
            sqs.get_queue_url(QueueName=name)
            took.append(time.perf_counter() - started)
            time.sleep(0.1)  # spread over several seconds of load (and cache lifetimes)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
    p50 = statistics.median(took)
    print(f"GetQueueUrl p50 {p50 * 1000:.1f} ms over 50 calls")
    assert p50 < 0.05
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=name)
    other = f"{name}-x"
    sqs.create_queue(QueueName=other)
    sqs.get_queue_url(QueueName=other)  # cached by the endpoint
    Broker(spark, str(served[0])).delete_queue(other)  # by another process
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            sqs.get_queue_url(QueueName=other)
        except sqs.exceptions.QueueDoesNotExist:
            return
        time.sleep(0.5)
    pytest.fail("a queue deleted elsewhere was still served after 20 s")


def test_concurrent_permission_and_tag_changes_all_land(sqs, name):
    """Each change builds on what is there (a policy statement, a tag) and is written as one
    compare-and-set: four clients at once lose none of them (they used to overwrite each other
    from one stale read)."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    labels = [f"share{i}" for i in range(4)]

    def change(label: str) -> None:
        client = json_client_for(sqs)
        client.add_permission(
            QueueUrl=url, Label=label, AWSAccountIds=["111122223333"], Actions=["SendMessage"]
        )
        client.tag_queue(QueueUrl=url, Tags={label: "yes"})

    threads = [threading.Thread(target=change, args=(label,)) for label in labels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])  # fmt: skip
    assert sorted(statement["Sid"] for statement in policy["Statement"]) == labels
    assert sorted(sqs.list_queue_tags(QueueUrl=url)["Tags"]) == labels


def test_delete_queue_finishes_a_queue_a_crash_left_without_its_table(sqs, served, spark, name):
    """A create_queue killed between its two commits leaves the queue registered without a
    table; a lookup reports it absent, but DeleteQueue by its URL still removes it."""
    from sparkqueue.engine import lifecycle

    broker = Broker(spark, str(served[0]))
    original, lifecycle.ensure_table = lifecycle.ensure_table, _crash
    try:
        with pytest.raises(RuntimeError):
            broker.create_queue(name)
    finally:
        lifecycle.ensure_table = original
    assert name in [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]
    url = f"{served[1]}/000000000000/{name}"
    sqs.delete_queue(QueueUrl=url)
    assert name not in [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]


def _crash(ctx, record) -> None:
    raise RuntimeError("the process dies here")


def json_client_for(sqs):
    """Another boto3 client like `sqs` (clients are not shared between threads)."""
    return json_client(sqs.meta.endpoint_url)

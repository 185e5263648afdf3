"""Requests no SDK would send, against the endpoint process: unsigned or badly signed, malformed,
oversized, unknown, incomplete or hostile. Each gets SQS's error and writes nothing."""

from __future__ import annotations

import http.client
import json
import uuid
from urllib.parse import urlencode, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from sparkqueue.limits import MAX_REQUEST_BYTES
from tests.integration.sqs_clients import ACCESS_KEY, REGION, SECRET_KEY, json_client

pytestmark = pytest.mark.spark
JSON = "application/x-amz-json-1.0"
FORM = "application/x-www-form-urlencoded; charset=utf-8"


def post(
    url: str, body: bytes, headers: dict[str, str], *, sign: bool = True, secret: str = SECRET_KEY
) -> tuple[int, dict[str, str], bytes]:
    """Sends one raw request, signed with SigV4 as botocore signs unless `sign` is False."""
    parts = urlsplit(url)
    headers = {"Host": parts.netloc, **headers}
    if sign:
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(Credentials(ACCESS_KEY, secret), "sqs", REGION).add_auth(request)
        headers = dict(request.headers.items())
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("POST", parts.path or "/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def json_call(url: str, action: str, body: bytes | dict, **options) -> tuple[int, str, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": JSON, "X-Amz-Target": f"AmazonSQS.{action}"}
    status, answer, payload = post(url, data, headers, **options)
    return status, answer.get("x-amzn-query-error", ""), payload


def query_call(url: str, form: dict[str, str] | bytes) -> tuple[int, bytes]:
    data = form if isinstance(form, bytes) else urlencode(form).encode()
    status, _, payload = post(url, data, {"Content-Type": FORM})
    return status, payload


def test_signatures(served, sqs):
    url = served[1]
    assert json_call(url, "ListQueues", {}, sign=False)[:2] == (
        403,
        "MissingAuthenticationToken;Sender",
    )
    assert json_call(url, "ListQueues", {}, secret="wrong")[:2] == (
        403,
        "SignatureDoesNotMatch;Sender",
    )
    with pytest.raises(ClientError) as error:
        json_client(url, key="someone-else").list_queues()
    assert error.value.response["Error"]["Code"] == "InvalidClientTokenId"
    before = sqs.list_queues().get("QueueUrls", [])
    status, _error_code, _ = json_call(url, "CreateQueue", {"QueueName": "unsigned"}, sign=False)
    assert status == 403 and sqs.list_queues().get("QueueUrls", []) == before
    stale = AWSRequest(method="POST", url=url, data=b"{}", headers={"Content-Type": JSON,
                       "X-Amz-Target": "AmazonSQS.ListQueues", "Host": urlsplit(url).netloc})  # fmt: skip
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", REGION).add_auth(stale)
    headers = dict(stale.headers.items())
    headers["X-Amz-Date"] = "20200101T000000Z"  # the signature no longer matches its date either
    assert post(url, b"{}", headers, sign=False)[0] == 403


def test_malformed_unknown_and_incomplete_requests(served, sqs):
    url = served[1]
    before = sqs.list_queues().get("QueueUrls", [])
    assert json_call(url, "CreateQueue", b"{not json")[:2] == (400, "MalformedQueryString;Sender")
    assert json_call(url, "CreateQueue", {"QueueName": 5})[:2] == (
        400,
        "MalformedQueryString;Sender",
    )
    assert json_call(url, "CreateQueue", b"[1, 2]")[0] == 400
    assert json_call(url, "CreateQueue", {})[:2] == (400, "MissingParameter;Sender")
    assert json_call(url, "FlyToTheMoon", {})[:2] == (400, "InvalidAction;Sender")
    assert json_call(url, "AddPermission", {"QueueUrl": "x"})[:2] == (
        400,
        "MissingParameter;Sender",
    )
    status, payload = query_call(url, {"Action": "FlyToTheMoon"})
    assert status == 400 and b"<Code>InvalidAction</Code>" in payload
    status, payload = query_call(url, {"QueueName": "no-action"})
    assert status == 400 and b"<Code>MissingParameter</Code>" in payload
    status, payload = query_call(url, b"Action=CreateQueue&QueueName=a&QueueName=b")
    assert status == 400 and b"<Code>MalformedQueryString</Code>" in payload
    status, payload = query_call(url, {"Action": "ReceiveMessage", "QueueUrl": f"{url}/000000000000/x",
                                       "MaxNumberOfMessages": "ten"})  # fmt: skip
    assert status == 400 and b"<Code>InvalidParameterValue</Code>" in payload
    assert sqs.list_queues().get("QueueUrls", []) == before


def test_oversized_bodies_are_refused_unread(served, sqs):
    url = served[1]
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.putrequest("POST", "/")
        connection.putheader("X-Amz-Target", "AmazonSQS.SendMessage")
        connection.putheader("Content-Length", str(MAX_REQUEST_BYTES + 1))
        connection.endheaders()  # no body is sent: the answer must not wait for one
        response = connection.getresponse()
        assert response.status == 413
        assert response.getheader("x-amzn-query-error") == "RequestEntityTooLarge;Sender"
    finally:
        connection.close()
    name = f"big-{uuid.uuid4().hex[:8]}"
    queue_url = sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": "1024"})[
        "QueueUrl"
    ]
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x" * 1000,
                         MessageAttributes={"a": {"DataType": "String", "StringValue": "y" * 30}})  # fmt: skip
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


HOSTILE = [
    "x'; DROP TABLE queues; --",
    "../../etc/passwd",
    "name with spaces",
    "ünïcödé",
    "a" * 81,
    "`backticks`",
    "",
]


def test_hostile_strings_in_every_field(served, sqs):
    url = served[1]
    before = sqs.list_queues().get("QueueUrls", [])
    for text in HOSTILE:
        status, error_code, _ = json_call(url, "CreateQueue", {"QueueName": text})
        assert status == 400 and error_code == "InvalidParameterValue;Sender", text
        status, error_code, _ = json_call(url, "GetQueueUrl", {"QueueName": text})
        assert status == 400, text
    assert sqs.list_queues().get("QueueUrls", []) == before
    name = f"target-{uuid.uuid4().hex[:8]}"
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    bad_messages = [
        {
            "MessageBody": "ok",
            "MessageAttributes": {"AWS.reserved": {"DataType": "String", "StringValue": "v"}},
        },
        {
            "MessageBody": "ok",
            "MessageAttributes": {"bad name": {"DataType": "String", "StringValue": "v"}},
        },
        {
            "MessageBody": "ok",
            "MessageAttributes": {"n": {"DataType": "Strung", "StringValue": "v"}},
        },
        {
            "MessageBody": "ok",
            "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "1; DROP"}},
        },
        {
            "MessageBody": "ok",
            "MessageAttributes": {"n": {"DataType": "Binary", "StringValue": "text"}},
        },
        {"MessageBody": "ok", "MessageGroupId": "g\x00"},
        {"MessageBody": "ok", "DelaySeconds": -1},
        {"MessageBody": "\ufffe"},
    ]
    for message in bad_messages:
        status, error_code, _ = json_call(url, "SendMessage", {"QueueUrl": queue_url, **message})
        assert status == 400, (message, error_code)
    for handle in [*HOSTILE, "2.x'; --.y.z"]:
        status, error_code, _ = json_call(
            url, "DeleteMessage", {"QueueUrl": queue_url, "ReceiptHandle": handle}
        )
        assert (status, error_code) == (404, "ReceiptHandleIsInvalid;Sender"), handle
    for queue_url_text in (
        f"{url}/000000000000/{HOSTILE[0]}",
        f"{url}/999999999999/{name}",
        "not a url",
    ):
        status, error_code, _ = json_call(
            url, "SendMessage", {"QueueUrl": queue_url_text, "MessageBody": "x"}
        )
        assert (status, error_code) == (400, "AWS.SimpleQueueService.NonExistentQueue;Sender")
    counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (
        counts["ApproximateNumberOfMessages"] == "0"
        and counts["ApproximateNumberOfMessagesDelayed"] == "0"
    )

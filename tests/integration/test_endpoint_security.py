"""The endpoint's security on real queues: requests really signed by botocore, replayed against the
endpoint process with one thing changed, change nothing; lower-case header names (raw HTTP, and
the AWS SDK for JavaScript v3 itself) work; without keys, boto3 unsigned works over both
protocols while what a web page could send changes nothing, and a long poll outlives the read
timeout; TLS with a verified certificate."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from sparkqueue import Broker
from sparkqueue.endpoint import AccessKeys, SqsEndpoint
from tests.integration.sqs_clients import ACCESS_KEY, REGION, SECRET_KEY, json_client, query_client
from tests.raw_http import (
    FORM,
    JSON,
    capture,
    payload_hash,
    self_signed,
    send,
    unsigned_payload,
)

JS_CLIENT = Path(__file__).resolve().parents[1] / "js"


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def counts(sqs, url: str) -> tuple[str, str]:
    found = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return found["ApproximateNumberOfMessages"], found["ApproximateNumberOfMessagesNotVisible"]


def test_replayed_signed_requests_with_one_thing_changed_change_nothing(served, sqs):
    url = served[1]
    name = f"victim-{uuid.uuid4().hex[:8]}"
    victim = sqs.create_queue(QueueName=name)["QueueUrl"]
    scratch = sqs.create_queue(QueueName=f"{name}-scratch")["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=victim, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(2)]
    )
    receive = capture(url, "receive_message", QueueUrl=victim)
    second_target = [
        ("X-Amz-Target", "AmazonSQS.DeleteQueue"),
        *receive.without("X-Amz-Target"),
        ("x-amz-target", receive.value("X-Amz-Target")),
    ]
    answer = send(address(url), "POST", receive.path, second_target, receive.body)
    assert (answer.status, answer.code) == (400, "InvalidParameterValue")
    for hook in (payload_hash, unsigned_payload):  # a signed payload hash, or none
        signed = capture(url, "purge_queue", before_sign=hook, QueueUrl=scratch)
        forged = signed.body.replace(scratch.encode(), victim.encode())
        answer = send(address(url), "POST", signed.path, signed.fields, forged)
        assert (answer.status, answer.code) == (403, "SignatureDoesNotMatch"), hook
    # a signed query-protocol request with its parameters in the URL and no body, given an
    # unsigned X-Amz-Target: the JSON protocol would read the queue from the path
    path = f"{urlsplit(victim).path}?Action=GetQueueUrl&QueueName={name}"
    request = AWSRequest(method="POST", url=url + path, data=b"", headers={"Content-Type": FORM})
    request.headers["Host"] = urlsplit(url).netloc
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", REGION).add_auth(request)
    added = [*request.headers.items(), ("X-Amz-Target", "AmazonSQS.PurgeQueue")]
    answer = send(address(url), "POST", path, added, b"")
    assert (answer.status, answer.code) == (403, "IncompleteSignature")
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == victim
    assert counts(sqs, victim) == ("2", "0")  # not deleted, purged or received
    # what the JS SDK sends: a signed x-amz-content-sha256 that is the body's
    hashing = json_client(url)
    hashing.meta.events.register_first(
        "before-sign.sqs", lambda request, **_: payload_hash(request)
    )
    hashing.send_message(QueueUrl=victim, MessageBody="hashed")
    assert counts(sqs, victim) == ("3", "0")


def signed_lower_case(url: str, action: str, params: dict) -> tuple[int, dict]:
    """One JSON-protocol call over http.client with every header name in lower case."""
    body = json.dumps(params).encode()
    netloc = urlsplit(url).netloc
    request = AWSRequest(
        method="POST",
        url=url + "/",
        data=body,
        headers={"host": netloc, "content-type": JSON, "x-amz-target": f"AmazonSQS.{action}"},
    )
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", REGION).add_auth(request)
    connection = http.client.HTTPConnection(*address(url), timeout=60)
    try:
        connection.putrequest("POST", "/", skip_host=True, skip_accept_encoding=True)
        for name, value in request.headers.items():
            connection.putheader(name.lower(), value)
        connection.putheader("content-length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_lower_case_header_names_send_receive_and_delete(served, sqs):
    url = served[1]
    name = f"lower-{uuid.uuid4().hex[:8]}"
    status, created = signed_lower_case(url, "CreateQueue", {"QueueName": name})
    assert status == 200, created
    queue = created["QueueUrl"]
    assert signed_lower_case(url, "SendMessage", {"QueueUrl": queue, "MessageBody": "hi"})[0] == 200
    status, got = signed_lower_case(
        url, "ReceiveMessage", {"QueueUrl": queue, "WaitTimeSeconds": 5}
    )
    assert status == 200 and [m["Body"] for m in got["Messages"]] == ["hi"]
    handle = got["Messages"][0]["ReceiptHandle"]
    assert (
        signed_lower_case(url, "DeleteMessage", {"QueueUrl": queue, "ReceiptHandle": handle})[0]
        == 200
    )
    assert counts(sqs, queue) == ("0", "0")


@pytest.fixture(scope="session")
def javascript_sdk() -> Path:
    """tests/js's node_modules (@aws-sdk/client-sqs), installed by `npm ci` once a session."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed (Node.js and npm are on every machine of this project)")
    done = subprocess.run(
        [npm, "ci", "--prefix", str(JS_CLIENT), "--no-audit", "--no-fund", "--prefer-offline"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci failed (is the npm registry reachable?):\n{done.stderr[-2000:]}")
    return JS_CLIENT


def test_the_javascript_sdk_v3_sends_receives_and_deletes(served, javascript_sdk):
    name = f"js-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    done = subprocess.run(
        ["node", str(javascript_sdk / "sqs_roundtrip.mjs"), served[1], name],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["queueUrl"] == f"{served[1]}/000000000000/{name}"
    assert result["received"] == [{"id": result["sentId"], "body": "from javascript", "lang": "js"}]
    assert (result["left"], result["inFlight"]) == ("0", "0")


@pytest.fixture
def own_broker(spark, tmp_path) -> Broker:
    return Broker(spark, str(tmp_path / "root"))  # on the real clock: long polls really wait


def test_without_keys_sdks_work_and_web_pages_change_nothing(own_broker, tmp_path):
    unsigned = Config(signature_version=UNSIGNED, retries={"max_attempts": 1}, read_timeout=60)
    with SqsEndpoint(own_broker, port=0, access_keys=AccessKeys({}), read_timeout=2) as endpoint:
        url = endpoint.url
        sqs = boto3.client("sqs", endpoint_url=url, region_name=REGION, config=unsigned)
        query = query_client(url, tmp_path / "model", signed=False)
        queue = sqs.create_queue(QueueName="orders")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="over json")
        query.send_message(QueueUrl=queue, MessageBody="over query")
        empty = query.create_queue(QueueName="empty")["QueueUrl"]
        started = time.monotonic()
        assert "Messages" not in sqs.receive_message(QueueUrl=empty, WaitTimeSeconds=4)
        assert time.monotonic() - started >= 4  # a wait twice the read timeout, answered
        here = address(url)
        host = f"127.0.0.1:{here[1]}"
        purge = json.dumps({"QueueUrl": queue}).encode()
        attacks = [
            ("GET", f"/?Action=DeleteQueue&QueueUrl={queue}", [("Host", host)], b"", 405),
            ("POST", "/", [("Host", host), ("Content-Type", "text/plain"),
                           ("Origin", "http://attacker.example")],
             f"Action=PurgeQueue&QueueUrl={queue}".encode(), 403),
            ("POST", "/", [("Host", f"attacker.example:{here[1]}"), ("Content-Type", JSON),
                           ("X-Amz-Target", "AmazonSQS.PurgeQueue")], purge, 403),
        ]  # fmt: skip
        for method, path, fields, body, status in attacks:
            assert send(here, method, path, fields, body).status == status, fields
        assert counts(sqs, queue) == ("2", "0")
        got = query.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=5)
        for message in got["Messages"]:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        assert sorted(m["Body"] for m in got["Messages"]) == ["over json", "over query"]


def test_tls_with_a_verified_certificate(own_broker, tmp_path):
    cert, key = self_signed(tmp_path)
    keys = AccessKeys({ACCESS_KEY: SECRET_KEY})
    with SqsEndpoint(
        own_broker, port=0, access_keys=keys, tls_cert=str(cert), tls_key=str(key)
    ) as endpoint:
        sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint.url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            verify=str(cert),
        )
        queue = sqs.create_queue(QueueName="secure")["QueueUrl"]
        assert queue.startswith("https://127.0.0.1:")
        sqs.send_message(QueueUrl=queue, MessageBody="encrypted on the wire")
        got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5)["Messages"]
        assert [m["Body"] for m in got] == ["encrypted on the wire"]

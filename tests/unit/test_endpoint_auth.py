"""Attacks on the endpoint's SigV4 check with requests really signed by botocore, replayed with one
thing changed: a second X-Amz-Target, a header renamed to lower case, a body changed under a
signed payload hash, UNSIGNED-PAYLOAD, headers the signature does not cover. Each is refused and
reaches nothing (a real `SqsEndpoint` on a socket, over a broker that records every call; no JVM).
And what real clients send passes: lower-case header names (the JS SDK v3) and a signed
x-amz-content-sha256."""

from __future__ import annotations

from urllib.parse import urlsplit

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.raw_http import (
    ACCESS_KEY,
    FORM,
    JSON,
    REGION,
    SECRET_KEY,
    capture,
    payload_hash,
    send,
    unsigned_payload,
)
from tests.unit.endpoint_stub import RecordingBroker, serving


@pytest.fixture
def served():
    broker = RecordingBroker("orders", "scratch")
    with serving(broker) as endpoint:
        yield broker, endpoint


def address(endpoint) -> tuple[str, int]:
    parts = urlsplit(endpoint.url)
    return parts.hostname, parts.port


def queue_url(endpoint, name: str) -> str:
    return f"{endpoint.url}/000000000000/{name}"


def test_a_second_target_cannot_turn_a_captured_receive_into_a_delete(served):
    broker, endpoint = served
    signed = capture(endpoint.url, "receive_message", QueueUrl=queue_url(endpoint, "orders"))
    target = signed.value("X-Amz-Target")
    assert target == "AmazonSQS.ReceiveMessage"
    forged = [
        ("X-Amz-Target", "AmazonSQS.DeleteQueue"),  # what dispatch used to read
        *signed.without("X-Amz-Target"),
        ("x-amz-target", target),  # what the signature check used to read
    ]
    answer = send(address(endpoint), "POST", signed.path, forged, signed.body)
    assert (answer.status, answer.code) == (400, "InvalidParameterValue")
    twice = [*signed.fields, ("X-Amz-Target", "AmazonSQS.DeleteQueue")]
    assert send(address(endpoint), "POST", signed.path, twice, signed.body).status == 400
    swapped = [*signed.without("X-Amz-Target"), ("X-Amz-Target", "AmazonSQS.DeleteQueue")]
    answer = send(address(endpoint), "POST", signed.path, swapped, signed.body)
    assert (answer.status, answer.code) == (403, "SignatureDoesNotMatch")
    assert broker.calls == [] and "orders" in broker.queues
    # the captured request itself passes (and reaches the broker, which has no such queue)
    answer = send(address(endpoint), "POST", signed.path, signed.fields, signed.body)
    assert answer.code == "AWS.SimpleQueueService.NonExistentQueue"
    assert broker.calls == [("get_queue", "orders")]


def test_lower_case_header_names_are_the_same_headers(served):
    broker, endpoint = served
    signed = capture(endpoint.url, "list_queues")
    lowered = [(name.lower(), value) for name, value in signed.fields]
    answer = send(address(endpoint), "POST", signed.path, lowered, signed.body)
    assert answer.status == 200, answer.body
    assert answer.headers["content-type"] == JSON  # the JSON protocol, from x-amz-target
    assert b"orders" in answer.body and broker.calls == [("list_queues", "")]


def delete_of_scratch(endpoint, before_sign):
    """A captured, signed DeleteQueue of the queue "scratch", `before_sign` changing its headers."""
    return capture(
        endpoint.url,
        "delete_queue",
        before_sign=before_sign,
        QueueUrl=queue_url(endpoint, "scratch"),
    )


def test_a_body_changed_under_a_signed_payload_hash_is_refused(served):
    broker, endpoint = served
    signed = delete_of_scratch(endpoint, payload_hash)
    assert "x-amz-content-sha256" in signed.value("Authorization")
    forged = signed.body.replace(b"scratch", b"orders")
    answer = send(address(endpoint), "POST", signed.path, signed.fields, forged)
    assert (answer.status, answer.code) == (403, "SignatureDoesNotMatch")
    assert broker.calls == [] and broker.queues == ["orders", "scratch"]
    # unchanged, the same request passes: a correct signed payload hash is accepted
    answer = send(address(endpoint), "POST", signed.path, signed.fields, signed.body)
    assert answer.status == 200 and ("delete_queue", "scratch") in broker.calls


def test_an_unsigned_payload_is_refused(served):
    broker, endpoint = served
    signed = delete_of_scratch(endpoint, unsigned_payload)
    for body in (signed.body, signed.body.replace(b"scratch", b"orders")):
        answer = send(address(endpoint), "POST", signed.path, signed.fields, body)
        assert (answer.status, answer.code) == (403, "SignatureDoesNotMatch")
    assert broker.calls == [] and broker.queues == ["orders", "scratch"]


def sign(url: str, fields: dict[str, str], body: bytes = b"") -> list[tuple[str, str]]:
    """botocore's SigV4 over exactly `fields` (and the Host), as any client would sign them."""
    request = AWSRequest(method="POST", url=url, data=body, headers=fields)
    request.headers["Host"] = urlsplit(url).netloc
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "sqs", REGION).add_auth(request)
    return list(request.headers.items())


def test_headers_the_signature_does_not_cover_are_refused(served):
    broker, endpoint = served
    # a signed query-protocol request to the queue's URL, parameters in the URL, an empty body
    path = "/000000000000/orders?Action=GetQueueUrl&QueueName=orders"
    signed = sign(f"{endpoint.url}{path}", {"Content-Type": FORM})
    added = [*signed, ("X-Amz-Target", "AmazonSQS.DeleteQueue")]  # the JSON protocol: no params
    answer = send(address(endpoint), "POST", path, added, b"")
    assert (answer.status, answer.code) == (403, "IncompleteSignature")
    token = [*signed, ("X-Amz-Security-Token", "anything")]
    assert send(address(endpoint), "POST", path, token, b"").code == "IncompleteSignature"
    body = b"{}"
    bare = sign(endpoint.url + "/", {"X-Amz-Target": "AmazonSQS.ListQueues"}, body)
    typed = [*bare, ("Content-Type", JSON)]
    assert send(address(endpoint), "POST", "/", typed, body).code == "IncompleteSignature"
    assert broker.calls == [] and broker.queues == ["orders", "scratch"]
    answer = send(address(endpoint), "POST", path, signed, b"")  # as signed: it passes
    assert answer.status == 200, answer.body
    assert broker.calls == [("get_queue", "orders")]


def test_malformed_or_repeated_header_fields_are_refused(served):
    broker, endpoint = served
    signed = capture(endpoint.url, "list_queues")
    for extra in (
        [("Content-Type", JSON)],
        [("HOST", signed.value("Host"))],
        [("Content-Length", str(len(signed.body)))] * 2,
    ):
        answer = send(address(endpoint), "POST", signed.path, [*signed.fields, *extra], signed.body)
        assert (answer.status, answer.code) == (400, "InvalidParameterValue"), extra
        assert answer.closed, extra
    # a field name with a space before its colon ends the head for http.server's parser: refused
    # rather than silently dropped
    spaced = [*signed.fields, ("X-Amz-Target ", "AmazonSQS.DeleteQueue")]
    answer = send(address(endpoint), "POST", signed.path, spaced, signed.body)
    assert answer.status == 400
    assert broker.calls == []


def test_the_header_map_is_case_insensitive_and_knows_repeats():
    from sparkqueue.endpoint.faults import SqsFault
    from sparkqueue.endpoint.transport import Headers

    headers = Headers.of([("X-Amz-Target", "AmazonSQS.ListQueues"), ("host", "h:1")])
    assert headers.get("x-amz-target") == "AmazonSQS.ListQueues" and headers.protocol == "json"
    assert "host" in headers and headers.get("Host") is None  # names are asked in lower case
    headers.check()
    repeated = Headers.of([("X-Amz-Target", "a"), ("x-amz-target", "b")])
    with pytest.raises(SqsFault) as fault:
        repeated.check()
    assert fault.value.kind.status == 400 and "x-amz-target" in fault.value.message
    assert Headers.of([("Content-Type", FORM)]).protocol == "query"
    with pytest.raises(SqsFault):
        Headers.of([("bad name", "x")]).check()


def test_a_region_pinned_endpoint_refuses_a_signature_for_another_region():
    """SQS's regional endpoints answer a request signed for another region 403
    SignatureDoesNotMatch; so does an endpoint pinned with --region (one serving any region
    takes any)."""
    broker = RecordingBroker("orders")
    with serving(broker, region="eu-west-3", redrive_every=0) as pinned:
        signed = capture(pinned.url, "list_queues")  # signed for us-east-1
        answer = send(address(pinned), "POST", signed.path, signed.fields, signed.body)
        assert (answer.status, answer.code) == (403, "SignatureDoesNotMatch")
        assert b"us-east-1" in answer.body and broker.calls == []
        mine = boto3.client(
            "sqs",
            endpoint_url=pinned.url,
            region_name="eu-west-3",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        signed = capture(pinned.url, "list_queues", client=mine)
        assert send(address(pinned), "POST", signed.path, signed.fields, signed.body).status == 200
    with serving(RecordingBroker("orders"), redrive_every=0) as free:
        signed = capture(free.url, "list_queues")
        assert send(address(free), "POST", signed.path, signed.fields, signed.body).status == 200

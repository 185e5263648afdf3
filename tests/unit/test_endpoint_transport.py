"""The endpoint's HTTP transport under attack, with raw sockets against a real `SqsEndpoint` over a
broker that records every call (no JVM): what a web page on the machine can send to the no-keys
mode (GETs, simple form posts, DNS rebinding), framing (no Content-Length, chunked bodies),
idle and stalled connections, too many connections, and TLS."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config

from tests.raw_http import FORM, JSON, REGION, request_bytes, self_signed, send, send_raw
from tests.unit.endpoint_stub import KEYS, NO_KEYS, RecordingBroker, serving

SQS_CLI = str(Path(sys.executable).with_name("sparkqueue"))


def address(endpoint) -> tuple[str, int]:
    parts = urlsplit(endpoint.url)
    return parts.hostname, parts.port


def sdk_fields(host: str, action: str = "ListQueues") -> list[tuple[str, str]]:
    """What boto3 sends unsigned over the JSON protocol (botocore's UNSIGNED config)."""
    return [
        ("Host", host),
        ("X-Amz-Target", f"AmazonSQS.{action}"),
        ("Content-Type", JSON),
        ("amz-sdk-invocation-id", "5f2c"),
    ]


@pytest.fixture
def local():
    broker = RecordingBroker("orders")
    with serving(broker, NO_KEYS) as endpoint:
        yield broker, endpoint


def test_without_keys_a_web_page_cannot_act(local):
    broker, endpoint = local
    where = address(endpoint)
    host = f"127.0.0.1:{where[1]}"
    delete = f"Action=DeleteQueue&QueueUrl={endpoint.url}/000000000000/orders"
    answer = send(where, "GET", f"/?{delete}", [("Host", host)])  # <img src=...>
    assert answer.status == 405 and answer.headers.get("allow") == "POST"
    browser = [("Host", host), ("Origin", "http://attacker.example")]
    for content_type in (FORM, "text/plain", "multipart/form-data; boundary=x"):  # <form>
        for fields in (browser, browser[:1]):  # with the Origin a browser adds, and without
            answer = send(
                where, "POST", "/", [*fields, ("Content-Type", content_type)], delete.encode()
            )
            assert (answer.status, answer.code) == (403, "AccessDenied"), (content_type, fields)
    preflight = [("Host", host), ("Origin", "http://attacker.example"),
                 ("Access-Control-Request-Method", "POST"),
                 ("Access-Control-Request-Headers", "x-amz-target")]  # fmt: skip
    answer = send(where, "OPTIONS", "/", preflight)  # what a page must ask before anything else
    assert answer.status >= 400 and not any(h.startswith("access-control-") for h in answer.headers)
    purge = f'{{"QueueUrl": "{endpoint.url}/000000000000/orders"}}'.encode()
    preflighted = [*sdk_fields(host, "PurgeQueue"), ("Origin", "http://attacker.example")]
    assert send(where, "POST", "/", preflighted, purge).code == "AccessDenied"
    assert broker.calls == [] and broker.queues == ["orders"]


def test_without_keys_only_a_loopback_host_with_the_port_is_served(local):
    broker, endpoint = local
    where = address(endpoint)
    for host in (
        f"attacker.example:{where[1]}",  # DNS rebinding: the page's own name, resolved to us
        f"127.0.0.1:{where[1] + 1}",
        "127.0.0.1",
        f"localhost.attacker.example:{where[1]}",
        f"user@localhost:{where[1]}",
    ):
        answer = send(where, "POST", "/", sdk_fields(host), b"{}")
        assert (answer.status, answer.code) == (403, "AccessDenied"), host
    no_host = [f for f in sdk_fields("") if f[0] != "Host"]
    assert send(where, "POST", "/", no_host, b"{}").code == "AccessDenied"
    assert broker.calls == []
    for host in (f"127.0.0.1:{where[1]}", f"localhost:{where[1]}", f"LocalHost:{where[1]}"):
        assert send(where, "POST", "/", sdk_fields(host), b"{}").status == 200, host
    assert len(broker.calls) == 3


def test_without_keys_unsigned_and_signed_sdk_clients_pass_over_both_protocols(local, tmp_path):
    from tests.integration.sqs_clients import query_client

    broker, endpoint = local
    unsigned = Config(signature_version=UNSIGNED, retries={"max_attempts": 1})
    for url in (endpoint.url, endpoint.url.replace("127.0.0.1", "localhost")):
        client = boto3.client("sqs", endpoint_url=url, region_name=REGION, config=unsigned)
        assert client.list_queues()["QueueUrls"] == [f"{url}/000000000000/orders"]
    query = query_client(endpoint.url, tmp_path, signed=False)
    assert query.meta.service_model.protocol == "query"
    assert query.list_queues()["QueueUrls"] == [f"{endpoint.url}/000000000000/orders"]
    signed = query_client(endpoint.url, tmp_path / "signed")  # any keys, as with a configured CLI
    assert signed.list_queues()["QueueUrls"] == [f"{endpoint.url}/000000000000/orders"]
    assert [c[0] for c in broker.calls] == ["list_queues"] * 4


def test_a_post_without_a_length_or_with_a_chunked_body_is_refused_unread(local):
    broker, endpoint = local
    where = address(endpoint)
    fields = sdk_fields(f"127.0.0.1:{where[1]}", "DeleteQueue")
    body = f'{{"QueueUrl": "{endpoint.url}/000000000000/orders"}}'.encode()
    answer = send_raw(where, request_bytes("POST", "/", fields, body, length=False))
    assert (answer.status, answer.code, answer.closed) == (411, "MissingContentLength", True)
    chunk = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    chunked = [*fields, ("Transfer-Encoding", "chunked")]
    answer = send_raw(where, request_bytes("POST", "/", chunked, length=False) + chunk)
    assert (answer.status, answer.code, answer.closed) == (501, "NotImplemented", True)
    both = [*chunked, ("Content-Length", str(len(chunk)))]
    assert send_raw(where, request_bytes("POST", "/", both) + chunk).status == 501
    for length in ("abc", "-1", "1 1", "³"):
        answer = send(where, "POST", "/", [*fields, ("Content-Length", length)], b"")
        assert (answer.status, answer.closed) == (400, True), length
    assert broker.calls == [] and broker.queues == ["orders"]


def test_a_closing_endpoint_refuses_requests_503_in_their_own_protocol_unread(local):
    """Once the endpoint closes (draining.py), a request is answered 503 ServiceUnavailable, which
    SDKs retry, with its body unread and the connection closed; JSON with lower-case names and
    the query protocol alike, and nothing reaches the broker."""
    broker, endpoint = local
    where = address(endpoint)
    host = f"127.0.0.1:{where[1]}"
    endpoint.in_flight.close()
    lowered = [(name.lower(), value) for name, value in sdk_fields(host, "DeleteQueue")]
    body = f'{{"QueueUrl": "{endpoint.url}/000000000000/orders"}}'.encode()
    answer = send(where, "POST", "/", lowered, body)
    assert (answer.status, answer.code, answer.closed) == (503, "ServiceUnavailable", True)
    assert b"shutting down" in answer.body and answer.headers["content-type"].startswith(JSON)
    form = [("Host", host), ("Content-Type", FORM)]
    answer = send(where, "POST", "/", form, b"Action=ListQueues&Version=2012-11-05")
    assert (answer.status, answer.code, answer.closed) == (503, "ServiceUnavailable", True)
    assert answer.body.startswith(b"<?xml") or b"<ErrorResponse" in answer.body
    assert broker.calls == [] and broker.queues == ["orders"]


def wait_closed(sock: socket.socket, within: float) -> float:
    """Seconds until the server closed `sock` (which sent what it had); fails after `within`."""
    started = time.monotonic()
    sock.settimeout(within)
    try:
        while sock.recv(4096):  # an answer (408, if any) then the close
            pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open over {within} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_idle_and_stalled_connections_are_closed():
    broker = RecordingBroker("orders")
    with serving(broker, NO_KEYS, read_timeout=1.0) as endpoint:
        where = address(endpoint)
        with socket.create_connection(where) as idle:
            assert wait_closed(idle, within=5) < 4
        fields = sdk_fields(f"127.0.0.1:{where[1]}")
        with socket.create_connection(where) as slow:
            slow.sendall(request_bytes("POST", "/", fields, b"{}")[:-10])  # a head cut short
            assert wait_closed(slow, within=5) < 4
        with socket.create_connection(where) as stalled:
            stalled.sendall(request_bytes("POST", "/", [*fields, ("Content-Length", "100")]))
            stalled.sendall(b"{")  # 1 of the 100 bytes promised
            assert wait_closed(stalled, within=5) < 4
        assert broker.calls == []
        assert send(where, "POST", "/", fields, b"{}").status == 200  # and it still serves


def test_a_body_trickled_in_is_cut_off_at_the_read_timeout_in_all():
    """A byte now and then, each within the read timeout, used to hold the connection for as
    long as the client liked (and a slot of the cap with it): the whole body has one deadline."""
    broker = RecordingBroker("orders")
    with serving(broker, NO_KEYS, read_timeout=1.0) as endpoint:
        where = address(endpoint)
        fields = [*sdk_fields(f"127.0.0.1:{where[1]}"), ("Content-Length", "100")]
        with socket.create_connection(where) as trickle:
            trickle.sendall(request_bytes("POST", "/", fields))
            started = time.monotonic()
            with contextlib.suppress(OSError):
                while time.monotonic() - started < 6:
                    trickle.sendall(b" ")  # a byte every 0.4 s: never idle for a whole second
                    time.sleep(0.4)
            assert wait_closed(trickle, within=5) + (time.monotonic() - started) < 4
        assert broker.calls == []


def test_with_keys_no_body_is_read_before_the_key_and_date_are_known():
    """A client without a key announcing a large body is answered at once from the head alone
    (before, the server waited to read the whole body before checking anything)."""
    broker = RecordingBroker("orders")
    with serving(broker, KEYS, read_timeout=30) as endpoint:
        where = address(endpoint)
        fields = [
            *sdk_fields(f"127.0.0.1:{where[1]}"),
            ("X-Amz-Date", "20260101T000000Z"),
            ("Authorization", "AWS4-HMAC-SHA256 Credential=nobody/20260101/us-east-1/sqs/"
             "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "0" * 64),
            ("Content-Length", "4000000"),
        ]  # fmt: skip
        started = time.monotonic()
        answer = send_raw(where, request_bytes("POST", "/", fields), timeout=10)
        assert (answer.status, answer.code) == (403, "InvalidClientTokenId")
        assert time.monotonic() - started < 5 and answer.closed
        assert broker.calls == []


def test_connections_beyond_the_cap_are_answered_503_and_closed():
    broker = RecordingBroker("orders")
    with serving(broker, NO_KEYS, max_connections=2, read_timeout=30) as endpoint:
        where = address(endpoint)
        fields = sdk_fields(f"127.0.0.1:{where[1]}")
        first, second = socket.create_connection(where), socket.create_connection(where)
        try:
            time.sleep(0.3)  # both accepted, both holding a slot while idle
            answer = send(where, "POST", "/", fields, b"{}")
            assert (answer.status, answer.code, answer.closed) == (503, "ServiceUnavailable", True)
            first.close()
            deadline = time.monotonic() + 5
            while (answer := send(where, "POST", "/", fields, b"{}")).status == 503:
                assert time.monotonic() < deadline, "a closed connection never gave its slot back"
                time.sleep(0.05)
            assert answer.status == 200
        finally:
            first.close()
            second.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_tls_serves_boto3_with_a_verified_certificate(certificate):
    cert, key = certificate
    broker = RecordingBroker("orders")
    with serving(broker, KEYS, tls_cert=str(cert), tls_key=str(key), read_timeout=2) as endpoint:
        assert endpoint.url.startswith("https://127.0.0.1:")
        where = address(endpoint)
        with socket.create_connection(where):  # a handshake never started holds no one up
            client = boto3.client(
                "sqs",
                endpoint_url=endpoint.url,
                region_name=REGION,
                aws_access_key_id="test-key",
                aws_secret_access_key="test-secret",
                verify=str(cert),
                config=Config(retries={"max_attempts": 1}),
            )
            assert client.list_queues()["QueueUrls"] == [f"{endpoint.url}/000000000000/orders"]
        with pytest.raises(ssl.SSLCertVerificationError):  # not trusted without the certificate
            send(where, "POST", "/", [("Host", "x")], tls=ssl.create_default_context())
        with socket.create_connection(where) as plain:  # plain HTTP on the TLS port: closed
            plain.sendall(request_bytes("POST", "/", [("Host", "x")]))
            assert wait_closed(plain, within=10) < 10


def test_serve_refuses_a_missing_or_half_tls_pair_before_starting(tmp_path, certificate):
    cert, _ = certificate
    for flags in (["--tls-cert", str(cert)], ["--tls-cert", str(cert), "--tls-key", "nope.pem"]):
        done = subprocess.run(
            [SQS_CLI, "serve", "--root", str(tmp_path / "root"), "--port", "0", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and "TLS" in done.stdout + done.stderr, done
        assert not (tmp_path / "root").exists()  # no broker was opened

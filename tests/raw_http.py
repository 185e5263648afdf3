"""Raw HTTP against the SQS endpoint for its security tests (unit and integration): requests
written byte by byte, with header names, cases, duplicates and framing no SDK would send, and
requests really signed by botocore (captured from a boto3 client just before they would be sent),
to replay with one thing changed."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import socket
import ssl
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

ACCESS_KEY, SECRET_KEY, REGION = "test-key", "test-secret", "us-east-1"
JSON = "application/x-amz-json-1.0"
FORM = "application/x-www-form-urlencoded; charset=utf-8"
Fields = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes
    closed: bool  # the server said it closes the connection after this answer

    @property
    def code(self) -> str:
        """The SQS error code, from either protocol's answer ("" when there is none)."""
        if "x-amzn-query-error" in self.headers:
            return self.headers["x-amzn-query-error"].split(";")[0]
        text = self.body.decode("utf-8", "replace")
        if "<Code>" in text:
            return text.split("<Code>", 1)[1].split("</Code>", 1)[0]
        return ""


@dataclass(frozen=True)
class Captured:
    """A request exactly as botocore would have sent it: method, path, header fields, body."""

    method: str
    path: str
    fields: list[tuple[str, str]]
    body: bytes

    def without(self, *names: str) -> list[tuple[str, str]]:
        lowered = {n.lower() for n in names}
        return [(k, v) for k, v in self.fields if k.lower() not in lowered]

    def value(self, name: str) -> str:
        return next(v for k, v in self.fields if k.lower() == name.lower())


class _Stop(Exception):
    """Raised by the capturing hook: the request was recorded and is not to be sent."""


def sqs_client(url: str, **options: Any) -> Any:
    """boto3's SQS client of the endpoint at `url`, signing with the test keys, never retrying."""
    return boto3.client(
        "sqs",
        endpoint_url=url,
        **{"region_name": REGION, **options},
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(retries={"max_attempts": 1}),
    )


def capture(
    url: str,
    operation: str,
    *,
    before_sign: Callable[[Any], None] | None = None,
    client: Any = None,
    **params: Any,
) -> Captured:
    """The request boto3 would send for `operation(**params)`, signed with the test keys;
    `before_sign(request)` may add headers first (as the JS SDK adds x-amz-content-sha256)."""
    client = client or sqs_client(url)
    seen: list[Any] = []

    def record(request: Any, **_: Any) -> None:
        seen.append(request)
        raise _Stop

    if before_sign is not None:
        client.meta.events.register_first(
            "before-sign.sqs", lambda request, **_: before_sign(request)
        )
    client.meta.events.register_first("before-send.sqs", record)
    with contextlib.suppress(_Stop):
        getattr(client, operation)(**params)
    request = seen[0]
    path = request.url.split("://", 1)[1]
    path = path[path.index("/") :] if "/" in path else "/"
    body = request.body or b""
    body = body.encode() if isinstance(body, str) else bytes(body)
    fields = [("Host", request.url.split("://", 1)[1].split("/", 1)[0])]  # urllib3 adds it
    fields += [
        (k, v.decode() if isinstance(v, bytes) else v)
        for k, v in request.headers.items()
        if k.lower() != "content-length"
    ]
    return Captured(request.method, path, fields, body)  # `send` gives the body's own length


def payload_hash(request: Any) -> None:
    """A before_sign hook: sign the body's SHA-256 in x-amz-content-sha256, as the JS SDK does."""
    body = request.body or b""
    body = body.encode() if isinstance(body, str) else body
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body).hexdigest()


def unsigned_payload(request: Any) -> None:
    """A before_sign hook: declare the payload unsigned (botocore then signs the header's value)."""
    request.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"


def send_raw(
    address: tuple[str, int],
    head: bytes,
    *,
    tls: ssl.SSLContext | None = None,
    timeout: float = 30,
) -> Answer:
    """Writes `head` (request line, fields, body: exactly these bytes) and reads one answer."""
    sock = socket.create_connection(address, timeout=timeout)
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname=address[0])
    try:
        sock.sendall(head)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return Answer(response.status, headers, body, bool(response.will_close))
    finally:
        sock.close()


def request_bytes(
    method: str, path: str, fields: Fields, body: bytes = b"", *, length: bool = True
) -> bytes:
    """A request's bytes: the fields in this order and case, then a Content-Length unless a field
    already gives one or `length` is False, then the body."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in fields)]
    if length and not any(k.lower() == "content-length" for k, _ in fields):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def send(
    address: tuple[str, int],
    method: str,
    path: str,
    fields: Fields,
    body: bytes = b"",
    **options: Any,
) -> Answer:
    return send_raw(address, request_bytes(method, path, fields, body), **options)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1 and its key (openssl's command line,
    which every machine of this project has): (cert.pem, key.pem) in `folder`."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key

"""One connection of the SQS endpoint (server.py): its requests read, checked as far as their head
allows, answered by the endpoint, and their work undone when the answer cannot reach the
client."""

from __future__ import annotations

import logging
import select
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from email.errors import MissingHeaderBodySeparatorDefect
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from . import wire
from .auth import AccessKeys, check_credentials
from .draining import InFlight
from .faults import SqsFault
from .transport import Headers, body_length

log = logging.getLogger(__name__)

Answer = tuple[int, dict[str, str], bytes]  # status, headers, body


class Endpoint(Protocol):
    """What a connection asks of its endpoint (server.SqsEndpoint)."""

    console: Any
    sqs: bool
    keys: AccessKeys
    region: str | None
    read_timeout: float
    in_flight: InFlight

    @property
    def answer(self) -> Callable[..., Answer]:
        """SqsEndpoint.answer: the request's answer, never raising."""


def fault_answer(fault: SqsFault, protocol: str, request_id: str) -> Answer:
    """The answer to a request refused or failed with `fault`, in the request's protocol."""
    headers, data = wire.encode_fault(fault, protocol, request_id)
    if fault.kind.name == "MethodNotAllowed":
        headers = {**headers, "Allow": "POST"}
    return fault.kind.status, {**headers, "x-amzn-RequestId": request_id}, data


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as SDKs expect
    server_version = "sparkqueue"

    def setup(self) -> None:
        # Every read and write of the connection gives up after this long without progress: a
        # client idle between requests, or stalled within one, is closed. Work on an answer (a
        # long poll's wait) touches no socket, so it is not bounded by it.
        self.timeout = self.server.endpoint.read_timeout  # type: ignore[attr-defined]
        super().setup()
        # The head and the body of an answer are two writes: without this, the body waits for the
        # client's delayed ACK of the head (Nagle), 40 ms on every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            try:  # here, on this connection's thread and within its timeout (see Listener)
                self.connection.do_handshake()
            except (OSError, ssl.SSLError) as error:
                log.debug("TLS handshake with %s failed: %s", self.client_address, error)
                return
        super().handle()

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def _serve(self) -> None:
        endpoint: Endpoint = self.server.endpoint  # type: ignore[attr-defined]
        # The one map of this request's headers: framing, signature, protocol and action read it.
        headers = Headers.of(self.headers.items(), defects=_cut_short(self.headers.defects))
        with endpoint.in_flight.admitted() as admitted:  # the endpoint closing waits for it
            if admitted:
                self._answer(endpoint, headers)
                return
        fault = SqsFault("ServiceUnavailable", "the endpoint is shutting down")
        status, answer, data = fault_answer(fault, headers.protocol, str(uuid.uuid4()))
        self.close_connection = True  # its body unread
        self._reply(status, {**answer, "Connection": "close"}, data)

    def _answer(self, endpoint: Endpoint, headers: Headers) -> None:
        if endpoint.console is not None and endpoint.console.serves(self.path):
            self._serve_console(endpoint.console, headers)
            return
        if not endpoint.sqs:
            self.close_connection = True
            self._reply(
                404, {"Content-Type": "text/plain", "Connection": "close"}, b"see /console/"
            )
            return
        try:
            size = body_length(self.command, headers)
            if endpoint.keys:  # no body is taken in for a client without a key
                region = endpoint.region
                check_credentials(endpoint.keys, headers, datetime.now(UTC), region)
        except SqsFault as fault:
            status, answer, data = fault_answer(fault, headers.protocol, str(uuid.uuid4()))
            self.close_connection = True  # the unread body must not be taken for a request
            self._reply(status, {**answer, "Connection": "close"}, data)
            return
        body = self._read_body(size)
        if len(body) < size:  # the client closed the connection within the body
            self.close_connection = True
            return
        undelivered: list[Callable[[], None]] = []
        status, answer, data = endpoint.answer(
            self.command, self.path, headers, body, connected=self._connected,
            undelivered=undelivered,
        )  # fmt: skip
        if undelivered and not self._connected():  # gone while its answer was made
            self.close_connection = True
            undo_all(undelivered)
            return
        try:
            self._reply(status, answer, data)
        except OSError:
            self.close_connection = True
            undo_all(undelivered)
            raise

    def _connected(self) -> bool:
        """Whether the client still waits for its answer: a connection it closed reads as its
        end at once (its next request, sent early, reads as data). Peeks at the socket itself,
        under TLS too: the bytes are not consumed."""
        try:
            probe = select.poll()  # not select.select: it refuses descriptors past 1023
            probe.register(self.connection, select.POLLIN)
            if not probe.poll(0):
                return True
            return bool(socket.socket.recv(self.connection, 1, socket.MSG_PEEK))
        except ConnectionResetError:
            return False
        except OSError:  # cannot tell: as before this probe, the answer is written
            return True

    def _serve_console(self, console: Any, headers: Headers) -> None:
        """A console page or form: its own sign-in and CSRF checks, not SigV4 (console/app.py);
        as for SQS requests, one refused from its head is answered with its body unread."""
        try:
            size = body_length(self.command, headers)
        except SqsFault as fault:
            refused = 400, {"Content-Type": "text/plain"}, fault.message.encode()
        else:
            refused = console.refusal(self.command, self.path, headers)
        if refused is not None:
            status, answer, data = refused
            self.close_connection = True  # the unread body must not be taken for a request
            self._reply(status, {**answer, "Connection": "close"}, data)
            return
        body = self._read_body(size)
        if len(body) < size:
            self.close_connection = True
            return
        self._reply(*console.answer(self.command, self.path, headers, body))

    def _read_body(self, size: int) -> bytes:
        """The body, within one read timeout for all of it (a client sending a byte now and then
        would otherwise hold its connection for as long as it likes); shorter if the client
        closed within it, TimeoutError (http.server closes the connection) past the deadline."""
        deadline = time.monotonic() + self.timeout
        chunks, left = [], size
        try:
            while left:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the request body took longer than the read timeout")
                self.connection.settimeout(remaining)
                chunk = self.rfile.read1(min(left, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            self.connection.settimeout(self.timeout)
        return b"".join(chunks)

    def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def undo_all(undelivered: list[Callable[[], None]]) -> None:
    """Undoes what an answer that never reached its client did (a receive's claim)."""
    for undo in undelivered:
        try:
            undo()
        except Exception:  # the messages come back when their visibility timeout ends
            log.exception("could not undo the work of an undelivered answer")


def _cut_short(defects: list[Exception]) -> bool:
    """Whether http.server's parser met a line in the head it could not read as a field (such as
    `X-Amz-Target : ...`): it then drops that line and every one after it. (Other defects it
    notes are about a MIME body, which an HTTP head does not have.)"""
    return any(isinstance(defect, MissingHeaderBodySeparatorDefect) for defect in defects)

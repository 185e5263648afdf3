"""The SQS endpoint: an HTTP server on one warm Spark session that answers SQS's API.

Each connection runs on its own thread (so concurrent clients share the group committer's
commits; `transport.Listener` caps how many, and a connection idle for the read timeout is
closed); each request on it is checked (framing, headers, the signature, or without keys that no
web page sent it; see `transport.py` and `auth.py`), decoded from either protocol, handed to its
action and answered in the protocol it came in. A waiting ReceiveMessage parks on a
condition (see `longpoll.py`), it never spins.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from email.errors import MissingHeaderBodySeparatorDefect
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from ..broker import Broker
from ..errors import InvalidParameterValue, QueueError
from ..limits import (
    ENDPOINT_MAX_CONNECTIONS,
    ENDPOINT_READ_TIMEOUT_SECONDS,
    REDRIVE_EVERY_SECONDS,
)
from . import messages, queues, wire
from .auth import AccessKeys, check_credentials, check_signature, signed_region
from .faults import SqsFault, fault_of
from .naming import DEFAULT_ACCOUNT, DEFAULT_REGION, Naming
from .regions import Regions
from .service import Request
from .transport import (
    LOOPBACK_NAMES,
    Headers,
    Listener,
    body_length,
    check_local,
    tls_context,
)
from .upkeep import RedrivePasses

log = logging.getLogger(__name__)
LOCAL_HOSTS = LOOPBACK_NAMES  # without keys, the only addresses the endpoint binds to
DEFAULT_PORT = 9324

Action = Callable[[Request], dict[str, Any]]
ACTIONS: dict[str, Action] = {
    "CreateQueue": queues.create_queue,
    "GetQueueUrl": queues.get_queue_url,
    "ListQueues": queues.list_queues,
    "DeleteQueue": queues.delete_queue,
    "GetQueueAttributes": queues.get_queue_attributes,
    "SetQueueAttributes": queues.set_queue_attributes,
    "PurgeQueue": queues.purge_queue,
    "TagQueue": queues.tag_queue,
    "UntagQueue": queues.untag_queue,
    "ListQueueTags": queues.list_queue_tags,
    "ListDeadLetterSourceQueues": queues.list_dead_letter_source_queues,
    "StartMessageMoveTask": queues.start_message_move_task,
    "ListMessageMoveTasks": queues.list_message_move_tasks,
    "CancelMessageMoveTask": queues.cancel_message_move_task,
    "AddPermission": queues.add_permission,
    "RemovePermission": queues.remove_permission,
    "SendMessage": messages.send_message,
    "SendMessageBatch": messages.send_message_batch,
    "ReceiveMessage": messages.receive_message,
    "DeleteMessage": messages.delete_message,
    "DeleteMessageBatch": messages.delete_message_batch,
    "ChangeMessageVisibility": messages.change_message_visibility,
    "ChangeMessageVisibilityBatch": messages.change_message_visibility_batch,
}


class SqsEndpoint:
    """Serves the queues of `broker` over SQS's HTTP API at `host:port` (port 0: any free one).

    With no access keys, requests are not authenticated, so the endpoint only binds to a
    localhost address and refuses what a web page could send; with keys, every request must carry
    a valid SigV4 signature by one of them. `tls_cert` and `tls_key` (PEM files) serve HTTPS.
    `read_timeout` closes a connection that sends nothing for that long; `max_connections` are
    served at once.
    """

    def __init__(
        self,
        broker: Broker,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        access_keys: AccessKeys | None = None,
        account: str = DEFAULT_ACCOUNT,
        region: str | None = None,
        redrive_every: float = REDRIVE_EVERY_SECONDS,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        read_timeout: float = ENDPOINT_READ_TIMEOUT_SECONDS,
        max_connections: int = ENDPOINT_MAX_CONNECTIONS,
        open_spark: Callable[[], Broker] | None = None,
        console: bool = False,
        sqs: bool = True,
    ) -> None:
        self.keys = AccessKeys.configured() if access_keys is None else access_keys
        if not self.keys and host not in LOCAL_HOSTS:
            raise InvalidParameterValue(
                f"without access keys the endpoint serves localhost only, not {host!r}; set"
                " SPARKQUEUE_ACCESS_KEYS=key:secret[,key:secret...] to serve other hosts"
            )
        # Pinned to `region`, or every region with queues of its own (regions.py); the home
        # region's names then say which region they are of, as every other region's do.
        self.region = region
        home = region or (DEFAULT_REGION if broker.root is not None else None)
        self.regions = Regions(broker, Naming(account, home), open_spark, apart=region is None)
        self.service = self.regions.home
        self.redrive = RedrivePasses(self.regions.pass_brokers, redrive_every)  # upkeep.py
        self.tls = tls_context(tls_cert, tls_key)
        self.read_timeout = read_timeout
        self._http = Listener(
            (host, port),
            _Handler,
            max_connections=max_connections,
            tls=self.tls,
            overloaded=_overloaded(),
        )
        self._http.endpoint = self  # type: ignore[attr-defined]
        self.port: int = self._http.server_address[1]
        self._thread: threading.Thread | None = None
        self.sqs = sqs
        self.console = self._console() if console else None

    def _console(self) -> Any:
        from ..console import Console, Sessions  # jinja2 and pygal load only for a console

        return Console(self.service, Sessions(self.keys), self.port, self.tls is not None)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{self.scheme}://{host}:{port}"

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"

    def serve_forever(self) -> None:
        self._http.serve_forever(poll_interval=0.2)

    def start(self) -> SqsEndpoint:
        """Serves on a background thread (for notebooks and tests); `close()` stops it."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        self.redrive.start()
        return self

    def close(self) -> None:
        self.regions.close()
        self.redrive.stop()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
        self._http.server_close()

    def __enter__(self) -> SqsEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(
        self,
        method: str,
        target: str,
        headers: Headers,
        body: bytes,
        *,
        connected: Callable[[], bool] = lambda: True,
        undelivered: list[Callable[[], None]] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body answering one request (never raises). `headers` is the one
        map of the request's headers that every check and the dispatch read; `connected` says
        whether the client still waits, and the action adds to `undelivered` what undoes its
        work if the answer cannot reach the client."""
        request_id = str(uuid.uuid4())
        protocol = headers.protocol
        undo = [] if undelivered is None else undelivered
        try:
            headers.check()
            if not target.startswith("/"):
                raise SqsFault("InvalidParameterValue", "the request target must be a path")
            origin = f"{self.scheme}://{headers.get('host') or ''}"
            if self.keys:
                url, region = f"{origin}{target}", self.region
                check_signature(self.keys, method, url, headers, body, datetime.now(UTC), region)
            else:
                check_local(method, headers, self.port, 80 if self.tls is None else 443)
            parts = urlsplit(target)
            call = wire.decode(headers.get("x-amz-target"), body, parts.query)
            action = ACTIONS.get(call.action)
            if action is None:
                raise SqsFault("UnsupportedOperation", f"{call.action} is not supported here")
            service = self.regions.service(signed_region(headers))
            result = action(Request(service, call.params, origin, parts.path, connected, undo))
            content_type, data = wire.encode_result(call, result, request_id)
            return 200, {"Content-Type": content_type, "x-amzn-RequestId": request_id}, data
        except SqsFault as fault:
            return self._fault(fault, protocol, request_id)
        except QueueError as error:  # opening a region: its root's name is not the client's
            return self._fault(self.service.private(fault_of(error)), protocol, request_id)
        except Exception:
            log.exception("request %s failed", request_id)
            if undo:  # the action's work reaches the client in no answer
                _undo(undo)
                undo.clear()
            fault = SqsFault("InternalError", "the server failed on this request; see its log")
            return self._fault(fault, protocol, request_id)

    @staticmethod
    def _fault(
        fault: SqsFault, protocol: str, request_id: str
    ) -> tuple[int, dict[str, str], bytes]:
        headers, data = wire.encode_fault(fault, protocol, request_id)
        if fault.kind.name == "MethodNotAllowed":
            headers = {**headers, "Allow": "POST"}
        return fault.kind.status, {**headers, "x-amzn-RequestId": request_id}, data


class _Handler(BaseHTTPRequestHandler):
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
        endpoint: SqsEndpoint = self.server.endpoint  # type: ignore[attr-defined]
        # The one map of this request's headers: framing, signature, protocol and action read it.
        headers = Headers.of(self.headers.items(), defects=_cut_short(self.headers.defects))
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
            status, answer, data = endpoint._fault(fault, headers.protocol, str(uuid.uuid4()))
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
            _undo(undelivered)
            return
        try:
            self._reply(status, answer, data)
        except OSError:
            self.close_connection = True
            _undo(undelivered)
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


def _undo(undelivered: list[Callable[[], None]]) -> None:
    """Undoes what an answer that never reached its client did (a receive's claim)."""
    for undo in undelivered:
        try:
            undo()
        except Exception:  # the messages come back when their visibility timeout ends
            log.exception("could not undo the work of an undelivered answer")


def _overloaded() -> bytes:
    """The whole answer to a connection beyond the cap, written before its request is read: a
    503 in the query protocol's XML (every SDK retries a 503, whatever its body)."""
    fault = SqsFault("ServiceUnavailable", "the server is serving all the connections it can")
    headers, data = wire.encode_fault(fault, "query", str(uuid.uuid4()))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"HTTP/1.1 503 Service Unavailable\r\n{head}Content-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + data


def _cut_short(defects: list[Exception]) -> bool:
    """Whether http.server's parser met a line in the head it could not read as a field (such as
    `X-Amz-Target : ...`): it then drops that line and every one after it. (Other defects it
    notes are about a MIME body, which an HTTP head does not have.)"""
    return any(isinstance(defect, MissingHeaderBodySeparatorDefect) for defect in defects)

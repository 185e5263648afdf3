"""The SQS endpoint: an HTTP server on one warm Spark session that answers SQS's API.

Each request runs on its own thread of a `ThreadingHTTPServer` (so concurrent clients share the
group committer's commits); it is checked (size, signature), decoded from either protocol, handed
to its action and answered in the protocol it came in. A waiting ReceiveMessage parks on a
condition (see `longpoll.py`), it never spins.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from ..broker import Broker
from ..errors import InvalidParameterValue, QueueError
from ..limits import MAX_REQUEST_BYTES
from . import messages, queues, wire
from .auth import AccessKeys, check_signature
from .faults import SqsFault, fault_of
from .naming import DEFAULT_ACCOUNT, DEFAULT_REGION, Naming
from .service import Request, Service

log = logging.getLogger(__name__)
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
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
    localhost address; with keys, every request must carry a valid SigV4 signature by one of them.
    """

    def __init__(
        self,
        broker: Broker,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        access_keys: AccessKeys | None = None,
        account: str = DEFAULT_ACCOUNT,
        region: str = DEFAULT_REGION,
    ) -> None:
        self.keys = AccessKeys.configured() if access_keys is None else access_keys
        if not self.keys and host not in LOCAL_HOSTS:
            raise InvalidParameterValue(
                f"without access keys the endpoint serves localhost only, not {host!r}; set"
                " SPARKQUEUE_ACCESS_KEYS=key:secret[,key:secret...] to serve other hosts"
            )
        self.service = Service(broker, Naming(account, region))
        self._http = ThreadingHTTPServer((host, port), _Handler)
        self._http.daemon_threads = True
        self._http.endpoint = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self._http.serve_forever(poll_interval=0.2)

    def start(self) -> SqsEndpoint:
        """Serves on a background thread (for notebooks and tests); `close()` stops it."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
        self._http.server_close()

    def __enter__(self) -> SqsEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body answering one request (never raises)."""
        request_id = str(uuid.uuid4())
        protocol = "json" if "X-Amz-Target" in headers else "query"
        host = headers.get("Host", "localhost")
        try:
            check_signature(
                self.keys, method, f"http://{host}{target}", headers, body, datetime.now(UTC)
            )
            parts = urlsplit(target)
            call = wire.decode(headers.get("X-Amz-Target"), body, parts.query)
            action = ACTIONS.get(call.action)
            if action is None:
                raise SqsFault("UnsupportedOperation", f"{call.action} is not supported here")
            result = action(Request(self.service, call.params, f"http://{host}", parts.path))
            content_type, data = wire.encode_result(call, result, request_id)
            return 200, {"Content-Type": content_type, "x-amzn-RequestId": request_id}, data
        except SqsFault as fault:
            return self._fault(fault, protocol, request_id)
        except QueueError as error:
            return self._fault(fault_of(error), protocol, request_id)
        except Exception:
            log.exception("request %s failed", request_id)
            fault = SqsFault("InternalError", "the server failed on this request; see its log")
            return self._fault(fault, protocol, request_id)

    @staticmethod
    def _fault(
        fault: SqsFault, protocol: str, request_id: str
    ) -> tuple[int, dict[str, str], bytes]:
        headers, data = wire.encode_fault(fault, protocol, request_id)
        return fault.kind.status, {**headers, "x-amzn-RequestId": request_id}, data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as SDKs expect
    server_version = "sparkqueue"

    def setup(self) -> None:
        super().setup()
        # The head and the body of an answer are two writes: without this, the body waits for the
        # client's delayed ACK of the head (Nagle), 40 ms on every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def _serve(self) -> None:
        endpoint: SqsEndpoint = self.server.endpoint  # type: ignore[attr-defined]
        length = self.headers.get("Content-Length", "0")
        size = int(length) if length.isdigit() else -1
        if not 0 <= size <= MAX_REQUEST_BYTES:
            protocol = "json" if "X-Amz-Target" in self.headers else "query"
            fault = SqsFault(
                "RequestEntityTooLarge",
                f"request bodies are at most {MAX_REQUEST_BYTES} bytes, with a Content-Length",
            )
            status, headers, data = endpoint._fault(fault, protocol, str(uuid.uuid4()))
            self.close_connection = True  # the unread body must not be taken for a request
            self._reply(status, {**headers, "Connection": "close"}, data)
            return
        body = self.rfile.read(size)
        status, headers, data = endpoint.answer(
            self.command, self.path, dict(self.headers.items()), body
        )
        self._reply(status, headers, data)

    def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

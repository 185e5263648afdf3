"""The SQS endpoint: an HTTP server on one warm Spark session that answers SQS's API.

Each connection runs on its own thread (handler.py; so concurrent clients share the group
committer's commits; `transport.Listener` caps how many, and a connection idle for the read
timeout is closed); each request on it is checked (framing, headers, the signature, or without keys that no
web page sent it; see `transport.py` and `auth.py`), decoded from either protocol, handed to its
action and answered in the protocol it came in. A waiting ReceiveMessage parks on a
condition (see `longpoll.py`), it never spins. Closing answers the requests under way before
it returns (see `draining.py`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..broker import Broker
from ..errors import InvalidParameterValue, QueueError
from ..limits import (
    ENDPOINT_CLOSE_WAIT_SECONDS,
    ENDPOINT_MAX_CONNECTIONS,
    ENDPOINT_READ_TIMEOUT_SECONDS,
    REDRIVE_EVERY_SECONDS,
)
from . import messages, queues, wire
from .auth import AccessKeys, check_signature, signed_region
from .draining import InFlight
from .faults import SqsFault, fault_of
from .handler import Answer, Endpoint, Handler, fault_answer, undo_all
from .naming import DEFAULT_ACCOUNT, DEFAULT_REGION, Naming
from .regions import Regions
from .service import Request
from .transport import LOOPBACK_NAMES, Headers, Listener, check_local, tls_context
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
            Handler,
            max_connections=max_connections,
            tls=self.tls,
            overloaded=_overloaded(),
        )
        self._http.endpoint = self  # type: ignore[attr-defined]
        self.port: int = self._http.server_address[1]
        self._thread: threading.Thread | None = None
        self.in_flight = InFlight()
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
        """Stops serving, once the requests under way are answered (see draining.py): from now
        on a request is answered 503 (SDKs retry it), long polls answer at once, move tasks and
        the redrive job stop after the step under way."""
        self.in_flight.close()
        self.regions.close(ENDPOINT_CLOSE_WAIT_SECONDS)
        self.redrive.stop()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
        # A request taken in may still be reading its body (for up to the read timeout), then work.
        waited = self.read_timeout + ENDPOINT_CLOSE_WAIT_SECONDS
        if not self.in_flight.drain(waited):
            log.warning("closing with requests still under way after %.0f s", waited)
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
    ) -> Answer:
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
            return fault_answer(fault, protocol, request_id)
        except QueueError as error:  # opening a region: its root's name is not the client's
            return fault_answer(self.service.private(fault_of(error)), protocol, request_id)
        except Exception:
            log.exception("request %s failed", request_id)
            if undo:  # the action's work reaches the client in no answer
                undo_all(undo)
                undo.clear()
            fault = SqsFault("InternalError", "the server failed on this request; see its log")
            return fault_answer(fault, protocol, request_id)


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


if TYPE_CHECKING:  # what a connection asks of its endpoint, the endpoint has

    def _serves(endpoint: SqsEndpoint) -> Endpoint:
        return endpoint

"""What an HTTP request must be before the endpoint reads it as an SQS call: one view of its
headers, a body framed by a Content-Length, and, when no access keys are configured, proof that
it does not come from a web page.

Headers: the server builds one `Headers` per request and everything reads that one map (the
signature check, the choice of protocol and action, the Host, the framing), so no two readers can
disagree on which of two `X-Amz-Target` fields counts: a name that appears twice (in any case) is
refused, and so is a head http.server's parser could not read whole.

No keys: the endpoint then trusts anything that can reach 127.0.0.1, and web pages open in a
browser on the machine can. A page can send a GET, or a "simple" POST (a form or `fetch` with a
form, multipart or text/plain body and no custom header) to any origin without asking it first;
anything else needs a CORS preflight, which this server never grants. So without keys a request
must be a POST carrying a header only an SDK sends (`Authorization`, `X-Amz-*`, `X-Amzn-*`,
`amz-sdk-*`: boto3 unsigned sends `X-Amz-Target` over JSON and `amz-sdk-invocation-id` over the
query protocol), no `Origin` (browsers add it to every cross-origin POST), and a `Host` that names
a loopback address with the bound port (DNS rebinding gives a page's own host name our address,
never our name).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidParameterValue
from ..limits import MAX_REQUEST_BYTES
from .faults import SqsFault

log = logging.getLogger(__name__)
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SDK_HEADER_PREFIXES = ("x-amz-", "x-amzn-", "amz-sdk-")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field names
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?")
_LENGTH = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class Headers:
    """A request's header fields by lower-cased name; `repeated` and `malformed` say what makes
    it unreadable (`check()` refuses it), kept rather than raised so that even the refusal can
    answer in the request's protocol."""

    values: Mapping[str, str]
    repeated: frozenset[str] = frozenset()
    malformed: bool = False

    @classmethod
    def of(cls, fields: Iterable[tuple[str, str]], *, defects: bool = False) -> Headers:
        """From the (name, value) fields in the order they came; `defects`: the parser met a
        line it could not read as a field (and dropped it and everything after it)."""
        values: dict[str, str] = {}
        repeated: set[str] = set()
        malformed = defects
        for name, value in fields:
            key = name.lower()
            malformed = malformed or not _TOKEN.fullmatch(name)
            if key in values:
                repeated.add(key)
            values[key] = value.strip()
        return cls(MappingProxyType(values), frozenset(repeated), malformed)

    def get(self, name: str) -> str | None:
        """The value of the field `name` (lower case), or None."""
        return self.values.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.values

    @property
    def protocol(self) -> str:
        """ "json" when the request names an X-Amz-Target, else "query" (as `wire.decode` reads
        it): the protocol its answer, a refusal too, is written in."""
        return "json" if "x-amz-target" in self.values else "query"

    def check(self) -> None:
        if self.malformed:
            raise SqsFault("InvalidParameterValue", "the request's header fields are malformed")
        if self.repeated:
            names = ", ".join(sorted(self.repeated))
            raise SqsFault("InvalidParameterValue", f"the header field(s) {names} appear twice")


def body_length(method: str, headers: Headers) -> int:
    """The length of the body to read, from the one Content-Length; SqsFault for a body the
    server cannot frame (the caller answers and closes the connection, the body unread)."""
    headers.check()
    if "transfer-encoding" in headers:
        # Chunked bodies are refused rather than read: SQS clients send a Content-Length, and a
        # server that ignored the encoding would read the chunks as the next request.
        raise SqsFault(
            "NotImplemented", "Transfer-Encoding is not supported; send a Content-Length"
        )
    length = headers.get("content-length")
    if length is None:
        if method == "POST":
            raise SqsFault("MissingContentLength", "a POST must give its body's Content-Length")
        return 0
    if not _LENGTH.fullmatch(length):
        raise SqsFault("InvalidParameterValue", "the Content-Length is not a number of bytes")
    size = int(length)
    if size > MAX_REQUEST_BYTES:
        raise SqsFault(
            "RequestEntityTooLarge", f"request bodies are at most {MAX_REQUEST_BYTES} bytes"
        )
    return size


def check_local(method: str, headers: Headers, port: int, default_port: int) -> None:
    """Refuses (SqsFault) a request to the no-keys endpoint that a web page could have sent."""
    if method != "POST":
        raise SqsFault("MethodNotAllowed", "without access keys this endpoint takes POSTs only")
    host = headers.get("host")
    if host is None or not is_loopback(host, port, default_port):
        raise SqsFault(
            "AccessDenied",
            f"without access keys, requests must address 127.0.0.1, localhost or [::1] at port"
            f" {port} in their Host header",
        )
    if "origin" in headers:
        raise SqsFault("AccessDenied", "without access keys, requests from web pages are refused")
    if not any(
        name == "authorization" or name.startswith(SDK_HEADER_PREFIXES) for name in headers.values
    ):
        raise SqsFault(
            "AccessDenied",
            "without access keys, a request must carry an AWS SDK's headers (X-Amz-Target,"
            " X-Amz-Date, Authorization or amz-sdk-invocation-id), which web pages cannot send",
        )


def is_loopback(host: str, port: int, default_port: int) -> bool:
    """Whether a Host header names a loopback address with `port` (`default_port` when bare)."""
    found = _HOST.fullmatch(host)
    if found is None:
        return False
    name = urlsplit(f"//{found[1]}").hostname or ""
    given = int(found[2]) if found[2] is not None else default_port
    return name.lower() in LOOPBACK_NAMES and given == port


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The server's TLS context for a PEM certificate (chain) and its key, or None for neither."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise InvalidParameterValue(
            "TLS needs both a certificate and its key (--tls-cert, --tls-key)"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise InvalidParameterValue(f"cannot load the TLS certificate and key: {error}") from None
    return context


class Listener(ThreadingHTTPServer):
    """http.server's threaded server with a cap on connections served at once (one more is
    answered `overloaded` and closed) and, given a TLS context, TLS whose handshake runs on the
    connection's own thread: on the accepting thread, one client that never sends its hello would
    stop every other from being accepted."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts of new connections wait, not fail

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        max_connections: int,
        tls: ssl.SSLContext | None,
        overloaded: bytes,
    ) -> None:
        if max_connections < 1:
            raise InvalidParameterValue(f"max_connections must be 1 or more, got {max_connections}")
        super().__init__(address, handler)
        self.tls = tls
        self.overloaded = overloaded
        self._slots = threading.BoundedSemaphore(max_connections)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, sock: socket.socket) -> None:
        """Answers 503 (SDKs retry it) and closes, never blocking the accepting thread: the answer
        fits a socket buffer, and what the client already sent is read off so that closing does not
        reset the connection under the answer. Over TLS the connection is closed unanswered."""
        try:
            if not isinstance(sock, ssl.SSLSocket):
                sock.setblocking(False)
                sock.send(self.overloaded)
                with contextlib.suppress(BlockingIOError):
                    while sock.recv(65536):
                        pass
        except OSError:
            pass
        self.shutdown_request(sock)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)

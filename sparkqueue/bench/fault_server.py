"""The fault proxy's process (faults.py starts it, `python -m sparkqueue.bench.fault_server
UPSTREAM STALL_SECONDS`): it forwards each request to the store, injects the faults armed for it,
and answers the steering requests on its own `/_faults/` paths with what it recorded."""

from __future__ import annotations

import http.client
import json
import random
import signal
import socket
import struct
import sys
import threading
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import SplitResult, urlsplit

from .faults import COMMITS, CONTROL, Armed, Injected, Target

# Headers of one hop, never forwarded: the proxy frames each request and answer itself.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
    "upgrade", "expect",
}  # fmt: skip
UPSTREAM_TIMEOUT_SECONDS = 120
_ERROR = "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"


@dataclass
class _State:
    stall_seconds: float
    delay: float = 0.0
    armed: list[Armed] = field(default_factory=list)
    injected: list[Injected] = field(default_factory=list)
    puts: list[dict[str, Any]] = field(default_factory=list)  # of log versions, as answered
    requests: Counter[str] = field(default_factory=Counter)  # forwarded, by `_kind`
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    random: random.Random = field(default_factory=lambda: random.Random(7))

    def take(self, method: str, path: str, agent: str) -> Armed | None:
        """The fault this request gets, if any (and it is counted)."""
        with self.lock:
            for armed in self.armed:
                if not armed.target.matches(method, path, agent):
                    continue
                if armed.remaining is None and self.random.random() >= armed.probability:
                    continue
                if armed.remaining is not None:
                    armed.remaining -= 1
                    if armed.remaining <= 0:
                        self.armed.remove(armed)
                self.injected.append(Injected(armed.kind, method, path))
                return armed
        return None


def _kind(method: str, path: str) -> str:
    """A request's kind for `requests`: its method and what it reads or writes."""
    where = urlsplit(path)
    if "list-type" in where.query or "comp=list" in where.query:
        return f"{method} list"
    return f"{method} {'log' if '/_delta_log/' in where.path else 'data'}"


class _Handler(BaseHTTPRequestHandler):
    """One client connection and its requests."""

    protocol_version = "HTTP/1.1"  # as the stores' clients speak (each answer then closes)
    state: _State
    upstream: SplitResult

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the injected faults are the record."""

    def _proxy(self) -> None:
        body = self._body()
        if self.path.startswith(CONTROL):
            return self._control(self.path.removeprefix(CONTROL), json.loads(body or b"{}"))
        fault = self.state.take(self.command, self.path, self.headers.get("User-Agent", ""))
        if self.state.delay and fault is None:  # `slow()`: every answer late, each counted
            with self.state.lock:
                self.state.injected.append(Injected("slow", self.command, self.path))
        if self.state.delay or (fault is not None and fault.kind == "slow"):
            self.state.stopping.wait(self.state.delay + (fault.seconds if fault else 0.0))
        kind = None if fault is None else fault.kind
        if kind == "error":
            return self._answer_error(500, "InternalError", "We encountered an internal error.")
        if kind == "slowdown":
            busy = "ServerBusy" if "x-ms-version" in self.headers else "SlowDown"
            return self._answer_error(503, busy, "Please reduce your request rate.")
        if kind == "stall":
            self.state.stopping.wait(self.state.stall_seconds)
        if kind in ("reset", "stall"):
            return self._break()
        with self.state.lock:
            self.state.requests[_kind(self.command, self.path)] += 1
        try:
            status, reason, headers, answer = self._forwarded(body)
        except OSError:
            return self._break()  # the store went away: so does the answer
        if COMMITS.matches(self.command, self.path, ""):
            with self.state.lock:
                self.state.puts.append({
                    "key": urlsplit(self.path).path,  # without ABFS's `?timeout=90`
                    "status": status,
                    "conditional": self.headers.get("If-None-Match") == "*",
                    "agent": self.headers.get("User-Agent", ""),
                    "lost": kind == "lose",
                })  # fmt: skip
        if kind == "lose":
            return self._break()
        self.send_response_only(status, reason)
        self.send_header("Connection", "close")  # each request on a connection of its own
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
            self.send_header("Content-Length", length)
        else:
            self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _proxy

    def _body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length is not None else None

    def _forwarded(self, body: bytes | None) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """The store's answer, over a connection of its own (never a retry: a request sent
        twice could act twice)."""
        parts = self.upstream
        forward = http.client.HTTPConnection(
            parts.hostname, parts.port, timeout=UPSTREAM_TIMEOUT_SECONDS
        )
        try:
            forward.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    forward.putheader(name, value)
            if body is not None:
                forward.putheader("Content-Length", str(len(body)))
            forward.putheader("Connection", "close")  # an answer of unknown length ends there
            forward.endheaders(body)
            response = forward.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            forward.close()

    def _control(self, what: str, body: dict[str, Any]) -> None:
        state, answer = self.state, {}
        with state.lock:
            if what == "arm":
                methods = frozenset(body.pop("methods"))
                target = Target(methods, body.pop("path"), body.pop("agent"))
                state.armed.append(Armed(target=target, **body))
            elif what == "slow":
                state.delay = float(body["seconds"])
            elif what == "disarm":
                state.armed.clear()
                state.delay = 0.0
            answer = {
                "armed": sum(a.remaining or 0 for a in state.armed),
                "injected": [[i.kind, i.method, i.path] for i in state.injected],
                "puts": state.puts,
                "requests": state.requests,
            }
        data = json.dumps(answer).encode()
        self.send_response_only(200)
        self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer_error(self, status: int, code: str, message: str) -> None:
        body = _ERROR.format(code=code, message=message).encode()
        self.send_response_only(status)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _break(self) -> None:
        """Closes the client's connection at once (a reset, not a goodbye)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def handle(self) -> None:
        with suppress(OSError, ValueError):  # a client that gave up and went away
            super().handle()

    def finish(self) -> None:
        with suppress(OSError, ValueError):  # a broken connection's buffers
            super().finish()


def main() -> None:
    """`python -m sparkqueue.bench.faults UPSTREAM STALL_SECONDS`: serves until terminated,
    after printing its port."""
    upstream, stall_seconds = urlsplit(sys.argv[1]), float(sys.argv[2])
    assert upstream.scheme == "http" and upstream.hostname, f"an http:// store: {sys.argv[1]}"
    state = _State(stall_seconds)
    handler = type("Handler", (_Handler,), {"state": state, "upstream": upstream})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: state.stopping.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    state.stopping.wait()
    server.shutdown()


if __name__ == "__main__":
    main()

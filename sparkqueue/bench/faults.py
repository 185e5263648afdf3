"""A fault-injecting HTTP proxy in front of an object store (moto's S3, Azurite, or a real
endpoint): what a store's network does on a bad day, on purpose and counted. Clients are pointed
at the proxy's address (delta-rs's `AWS_ENDPOINT_URL` or `AZURITE_BLOB_STORAGE_URL`, Hadoop's
endpoint settings) and speak to it as to the store; it forwards each request unchanged and, where
a fault is armed for it:

- `lose`: forwards the request, then breaks the connection: the store acted, the caller heard
  nothing (the case a retry must not turn into a second write);
- `error`: answers 500 InternalError without forwarding;
- `slowdown`: answers 503 (S3's `SlowDown`, Azure's `ServerBusy`) without forwarding;
- `reset`: breaks the connection without forwarding;
- `stall`: holds the request past the client's timeout without forwarding, then breaks it;
- `slow`: forwards after a delay (`slow()` delays every answer instead).

A fault is armed for the next N requests a `Target` matches (method, path pattern, User-Agent
part), or for each such request with a probability. Every fault injected is recorded, and so is
every put of a Delta log version the store answered (which versions were written, how often, and
whether each put was conditional: a journal for stores whose emulator keeps none).
"""

from __future__ import annotations

import http.client
import json
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import SplitResult, urlsplit

KINDS = ("lose", "error", "slowdown", "reset", "stall", "slow")
# Headers of one hop, never forwarded: the proxy frames each request and answer itself.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
    "upgrade", "expect",
}  # fmt: skip
UPSTREAM_TIMEOUT_SECONDS = 120
CONTROL = "/_faults/"  # the proxy's own paths: how a test steers it
_ERROR = "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"


@dataclass(frozen=True)
class Target:
    """The requests a fault may hit: any of `methods` (none: every method), a path (with its
    query) that `path` (a regular expression) is found in, a User-Agent that holds `agent`."""

    methods: frozenset[str] = frozenset()
    path: str = ""
    agent: str = ""

    @classmethod
    def commits_of(cls, location: str) -> Target:
        """The log-version puts of the table at `location` alone (a store's request path ends
        with the table's path)."""
        return cls(frozenset({"PUT"}), re.escape(urlsplit(location).path) + _VERSION)

    def matches(self, method: str, path: str, agent: str) -> bool:
        return (
            (not self.methods or method in self.methods)
            and re.search(self.path, path) is not None
            and self.agent in agent
        )


# A Delta log version's put: delta-rs's conditional put, S3A's, and ABFS's copy onto the name.
_VERSION = r"/_delta_log/\d{20}\.json(\?|$)"  # ABFS adds a query
COMMITS = Target(frozenset({"PUT"}), _VERSION)
EVERYTHING = Target()


@dataclass(frozen=True)
class Injected:
    """A fault the proxy injected: its kind and the request it hit."""

    kind: str
    method: str
    path: str


@dataclass
class _Armed:
    kind: str
    target: Target
    remaining: int | None  # None: for as long as it stays armed, at `probability`
    probability: float = 1.0
    seconds: float = 0.0


@dataclass
class _State:
    stall_seconds: float
    delay: float = 0.0
    armed: list[_Armed] = field(default_factory=list)
    injected: list[Injected] = field(default_factory=list)
    puts: list[dict[str, Any]] = field(default_factory=list)  # of log versions, as answered
    requests: Counter[str] = field(default_factory=Counter)  # forwarded, by `_kind`
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    random: random.Random = field(default_factory=lambda: random.Random(7))

    def take(self, method: str, path: str, agent: str) -> _Armed | None:
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


class FaultSwitches:
    """The steering of a running proxy at `url`, over HTTP on its own `/_faults/` paths: from
    the process that started it or any other (a Spark driver that arms a fault before each of
    its operations)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def arm(
        self, kind: str, target: Target = EVERYTHING, count: int = 1, *, seconds: float = 1.0
    ) -> None:
        """The next `count` requests `target` matches get the fault `kind` (`seconds`: a
        `slow` fault's delay)."""
        self._steer("arm", _armed(kind, target, count, 1.0, seconds))

    def chance(
        self, kind: str, probability: float, target: Target = EVERYTHING, *, seconds: float = 1.0
    ) -> None:
        """Each request `target` matches gets the fault `kind` with `probability`, until
        disarmed."""
        self._steer("arm", _armed(kind, target, None, probability, seconds))

    def slow(self, seconds: float) -> None:
        """Every answer from now on comes `seconds` late (0: on time again)."""
        self._steer("slow", {"seconds": seconds})

    def disarm(self) -> None:
        """No fault armed, no delay."""
        self._steer("disarm", {})

    def armed(self) -> int:
        """How many counted faults are still waiting for their requests."""
        return int(self._steer("state", {})["armed"])

    def injected(self) -> list[Injected]:
        return [Injected(*each) for each in self._steer("state", {})["injected"]]

    def log_puts(self) -> list[dict[str, Any]]:
        """Every put of a Delta log version the store answered (whether or not its answer
        reached the client): key (the request's path), status, conditional (`If-None-Match: *`),
        lost (the proxy broke it after the store acted)."""
        return list(self._steer("state", {})["puts"])

    def requests(self) -> Counter[str]:
        """Requests forwarded to the store so far, by kind: method and `log` (the Delta log's),
        `list` or `data` (data files)."""
        return Counter(self._steer("state", {})["requests"])

    def tally(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        return Counter(each.kind for each in self.injected())

    def _steer(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.url}{CONTROL}{what}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"{}")


class FaultProxy(FaultSwitches):
    """The proxy: a process of its own (delta-rs holds the GIL through some of its calls, so a
    proxy thread beside it would stall with it). A context manager; `fault_proxy()` starts
    one."""

    def __init__(self, upstream: str, *, stall_seconds: float = 10.0) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, upstream, str(stall_seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        port = self._process.stdout.readline().strip()
        if not port.isdigit():
            self._process.kill()
            raise RuntimeError(f"the fault proxy did not start (exit {self._process.wait()})")
        super().__init__(f"http://127.0.0.1:{port}")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _armed(
    kind: str, target: Target, count: int | None, probability: float, seconds: float
) -> dict[str, Any]:
    assert kind in KINDS, f"a fault is one of {KINDS}: {kind!r}"
    return {
        "kind": kind,
        "methods": sorted(target.methods),
        "path": target.path,
        "agent": target.agent,
        "remaining": count,
        "probability": probability,
        "seconds": seconds,
    }


@contextmanager
def fault_proxy(upstream: str, *, stall_seconds: float = 10.0) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream, stall_seconds=stall_seconds)
    try:
        yield proxy
    finally:
        proxy.stop()


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
                state.armed.append(_Armed(target=target, **body))
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

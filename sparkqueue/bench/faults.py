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

import json
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

KINDS = ("lose", "error", "slowdown", "reset", "stall", "slow")
CONTROL = "/_faults/"  # the proxy's own paths: how a test steers it


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
class Armed:
    """A fault waiting for the requests it is aimed at (fault_server.py holds them)."""

    kind: str
    target: Target
    remaining: int | None  # None: for as long as it stays armed, at `probability`
    probability: float = 1.0
    seconds: float = 0.0


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
            [sys.executable, "-m", "sparkqueue.bench.fault_server", upstream, str(stall_seconds)],
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

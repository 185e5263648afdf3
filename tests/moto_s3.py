"""moto's S3 server with two things a race test needs (run as `python -m tests.moto_s3 PORT
JOURNAL`). Mutating requests run one at a time, so that a conditional put (`If-None-Match: *`)
checks and writes as one step, as Amazon S3 does (moto's threaded server alone checks and writes
in two steps). And every answered put of a Delta log version (`_delta_log/<20 digits>.json`)
is journaled, one JSON line each: its key, its status, and whether it was conditional. So a test
can prove that no version was written twice and that every commit, of either engine, asked S3
to refuse an existing version.

A test may also lose answers: while the file `JOURNAL.lose` holds `N AGENT`, the next N log-version
puts that S3 stored, from clients whose User-Agent contains AGENT, are answered 500 instead of
200, as when a connection breaks after the store has the object."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

LOG_VERSION = re.compile(r"/_delta_log/\d{20}\.json$")
MUTATING = {"PUT", "POST", "DELETE"}
LOST = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code>"
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)


class Serialized:
    """WSGI middleware: mutating requests one at a time; log-version puts journaled."""

    def __init__(self, app: Any, journal: str) -> None:
        self.app = app
        self.journal = open(journal, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self.losing = Path(f"{journal}.lose")
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] not in MUTATING:
            return self.app(environ, start_response)
        path = environ.get("PATH_INFO", "")
        answered: list[tuple[str, Any, tuple[Any, ...]]] = []

        def starting(status: str, headers: Any, *rest: Any) -> Any:
            answered.append((status, headers, rest))  # sent below, or replaced by a lost answer
            return lambda data: None

        with self.lock:
            body = b"".join(self.app(environ, starting))
            status = int(answered[0][0].split()[0])
            if environ["REQUEST_METHOD"] == "PUT" and LOG_VERSION.search(path):
                lost = status == 200 and self._lose(environ.get("HTTP_USER_AGENT", ""))
                entry = {
                    "key": path,
                    "status": status,
                    "conditional": environ.get("HTTP_IF_NONE_MATCH") == "*",
                    "lost": lost,
                }
                self.journal.write(json.dumps(entry) + "\n")
                if lost:
                    return self._error(start_response)
        status_line, headers, rest = answered[0]
        start_response(status_line, headers, *rest)
        return [body]

    def _lose(self, agent: str) -> bool:
        """Whether to lose this stored put's answer (and count it)."""
        if not self.losing.exists():
            return False
        count, _, wanted = self.losing.read_text().strip().partition(" ")
        if int(count or 0) <= 0 or wanted not in agent:
            return False
        self.losing.write_text(f"{int(count) - 1} {wanted}")
        return True

    @staticmethod
    def _error(start_response: Any) -> list[bytes]:
        start_response(
            "500 Internal Server Error",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(LOST)))],
        )
        return [LOST]


def main() -> None:
    port, journal = int(sys.argv[1]), sys.argv[2]
    app = Serialized(DomainDispatcherApplication(create_backend_app), journal)
    run_simple(
        "127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler
    )  # fmt: skip


if __name__ == "__main__":
    main()

"""The requests an endpoint is answering, so that closing it waits for them.

A request's work runs on its connection's thread, a daemon (http.server's threading server: an
idle keep-alive connection must not hold the process up). A process that ends while such a
thread is inside delta-rs dies with SIGSEGV (CPython before 3.14 ends daemon threads with
pthread_exit, which Rust frames cannot unwind), and the request's client gets no answer for
work that may have been done. So closing the endpoint refuses requests from then on with a 503
(every SDK retries one) and waits for those under way to be answered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class InFlight:
    """Counts the requests under way; once closed, admits no more."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0
        self._closed = False

    @contextmanager
    def admitted(self) -> Iterator[bool]:
        """Counts the block as a request under way: True, or False once closed (the block then
        answers without doing the request's work)."""
        with self._changed:
            if self._closed:
                admitted = False
            else:
                admitted = True
                self._count += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._changed:
                    self._count -= 1
                    self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True

    def drain(self, seconds: float) -> bool:
        """Waits up to `seconds` for the requests under way: whether none is left."""
        deadline = time.monotonic() + seconds
        with self._changed:
            return self._changed.wait_for(
                lambda: self._count == 0, timeout=max(0.0, deadline - time.monotonic())
            )

"""Keeps long-running work invisible: a background thread that periodically extends visibility."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from ..errors import HeartbeatFailed, InvalidParameterValue, QueueError, ReceiptHandleIsInvalid

log = logging.getLogger(__name__)

Extend = Callable[[list[str], int], dict[str, QueueError | None]]


def check_interval(visibility_timeout: int, interval: float) -> float:
    """An interval that can keep a message hidden: shorter than the timeout it renews."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise InvalidParameterValue(
            f"interval must be a positive number of seconds, got {interval!r}"
        )
    if interval >= visibility_timeout:
        raise InvalidParameterValue(
            f"a heartbeat every {interval} s cannot keep messages hidden for a visibility_timeout"
            f" of {visibility_timeout} s: the interval must be shorter than the timeout"
        )
    return float(interval)


class Heartbeat:
    """Context manager: extends every still-held handle by `visibility_timeout` every `interval` s.

    A handle whose message was deleted inside the block is simply dropped. Any other failure is
    logged when it happens and raised as HeartbeatFailed when the block exits (unless the block
    itself raised), so a lost extension is never silent.
    """

    def __init__(
        self, extend: Extend, receipt_handles: list[str], visibility_timeout: int, interval: float
    ) -> None:
        self._extend = extend
        self._held = list(dict.fromkeys(receipt_handles))
        self._timeout = visibility_timeout
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sparkqueue-heartbeat", daemon=True)
        self.beats = 0
        self.failures: dict[str, QueueError] = {}

    @property
    def held(self) -> list[str]:
        return list(self._held)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self.failures and exc is None:
            summary = "; ".join(
                f"{error.code}: {error.message}" for error in self.failures.values()
            )
            raise HeartbeatFailed(f"{len(self.failures)} visibility extension(s) failed: {summary}")

    def beat(self) -> None:
        """Extends every held handle once."""
        if not self._held:
            return
        try:
            outcomes = self._extend(self._held, self._timeout)
        except Exception as error:  # a beat that fails as a whole must not kill the thread silently
            log.error("heartbeat failed to extend %d message(s): %s", len(self._held), error)
            failure = error if isinstance(error, QueueError) else QueueError(str(error))
            self.failures.update({handle: failure for handle in self._held})
            self._held = []
            return
        for handle, error in outcomes.items():
            if error is None:
                continue
            self._held.remove(handle)
            if isinstance(error, ReceiptHandleIsInvalid) and error.message_gone:
                continue
            log.error("heartbeat could not extend a message: %s", error)
            self.failures[handle] = error
        self.beats += 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat()

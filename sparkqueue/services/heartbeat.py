"""Keeps long-running work invisible: a background thread that periodically extends visibility.

An extension sets the message's visibility to the moment the extension's commit reads its clock
plus the timeout, and that commit takes a while (it may also wait for a shared round to finish):
so a beat must start well before the last extension runs out, not merely every `interval`
seconds. Each beat is timed, and the next starts no later than the timeout minus twice the
slowest of the recent beats after the last one began: with a timeout of a few seconds on a real
clock, the beats come as often as needed to keep the message hidden.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType

from ..errors import HeartbeatFailed, InvalidParameterValue, QueueError, ReceiptHandleIsInvalid

log = logging.getLogger(__name__)

Extend = Callable[[list[str], int], dict[str, QueueError | None]]
RECENT_BEATS = 5  # how many beat durations the schedule looks back on
FIRST_BEAT_GUESS_SECONDS = 1.0  # a beat's duration before any has been timed (a commit here)


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
        self._durations: deque[float] = deque(maxlen=RECENT_BEATS)
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

    def next_wait(self) -> float:
        """Seconds from a beat's start to the next one's: the interval, or sooner when the recent
        beats were slow enough that waiting the interval would let the timeout run out."""
        slowest = max(self._durations, default=FIRST_BEAT_GUESS_SECONDS)
        return max(0.0, min(self._interval, self._timeout - 2 * slowest))

    def _run(self) -> None:
        # The messages were received about one operation before the block began: the first
        # beat comes that much sooner (at once, for a timeout of a few seconds).
        started = time.monotonic() - FIRST_BEAT_GUESS_SECONDS
        while not self._stop.wait(max(0.0, started + self.next_wait() - time.monotonic())):
            started = time.monotonic()
            self.beat()
            self._durations.append(time.monotonic() - started)

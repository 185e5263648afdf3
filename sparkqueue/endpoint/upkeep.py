"""The redrive pass, run by the endpoint itself while it serves.

Messages received `maxReceiveCount` times wait for a redrive pass to move them to their
dead-letter queue (and expired claims wait for it to be released, old messages to be dropped).
SQS clients expect that to happen on its own, with no separate job to run, so `sparkqueue serve`
runs `Broker.redrive` over its queues every `every_seconds` (0: never, for deployments that run
the redrive job elsewhere) on a daemon thread; a failed pass is logged and the next one retries.
The pass runs on Spark where it can: an endpoint serving through the native engine alone opens
its Spark broker (and so its JVM) at the first pass, on this thread, never on a request's, and
the pass also does the table upkeep it finds due, as the redrive job would. Where it cannot (no
pyspark installed, or object storage, where Spark stays out of a native endpoint's process) the
pass runs through the native engine: the same moves, releases, upkeep and metrics. Passes share the
queues with clients and Spark jobs through optimistic transactions, as the job does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..broker import Broker

log = logging.getLogger(__name__)


class RedrivePasses:
    """`Broker.redrive` every `every_seconds` between `start()` and `stop()`, on each broker that
    `brokers()` lists a way to open (each region's; opened at its first pass)."""

    def __init__(
        self, brokers: Callable[[], list[Callable[[], Broker]]], every_seconds: float
    ) -> None:
        if isinstance(every_seconds, bool) or not every_seconds >= 0:
            raise ValueError(f"the redrive interval must be 0 or more seconds, got {every_seconds}")
        self._brokers = brokers
        self.every_seconds = every_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def start(self) -> None:
        if self.every_seconds and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="redrive", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stops after the pass under way, if any (each of its moves is crash-safe anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            try:
                brokers = self._brokers()
            except Exception:
                log.exception("finding the brokers for a redrive pass failed; the next retries")
                continue
            for broker in brokers:
                if not self._stop.is_set():
                    self._pass(broker)
            self.passes += 1

    def _pass(self, broker: Callable[[], Broker]) -> None:
        started = time.monotonic()
        try:
            report = broker().redrive()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # a delta-rs panic too: the passes go on
            log.exception("endpoint redrive pass failed; the next one retries")
            return
        if report.moved_to_dead_letter or report.released or report.expired_by_retention:
            log.info(
                "redrive pass: moved %d to dead-letter queues, released %d, expired %d (%.1f s)",
                report.moved_to_dead_letter,
                report.released,
                report.expired_by_retention,
                time.monotonic() - started,
            )

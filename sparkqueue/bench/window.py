"""Running a benchmark's loops for a measurement window (every scenario that runs threads: the
loads, FIFO, worker, endpoint, scaling, drivers and peers scenarios)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence


def during_window(
    loops: Sequence[Callable[[], None]], seconds: float, stop: threading.Event
) -> None:
    """Runs each loop on a thread of its own for `seconds`, then sets `stop` and waits for them."""
    threads = [threading.Thread(target=loop) for loop in loops]
    for thread in threads:
        thread.start()
    time.sleep(seconds)  # the measurement window
    stop.set()
    for thread in threads:
        thread.join()

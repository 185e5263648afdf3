"""The clock every scenario reads: one call timed, percentiles, a `receive(1)` + `delete` pair
timed step by step (the latency, checkpoint and simulated-day scenarios each time that pair, so
they time it alike), and a child process's first line waited for with a bound."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """How long `action` took (seconds), and what it returned."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def p50_ms(values: Sequence[float]) -> float:
    """The median of `values` (seconds), in milliseconds."""
    return statistics.median(values) * 1000


def receive_delete(client: Any) -> tuple[float, float]:
    """One `receive(1)` and the `delete` of what it took, on a queue or a buffered client that
    holds messages: their seconds."""
    receive_s, [message] = timed(lambda: client.receive(1, visibility_timeout=3_600))
    return receive_s, timed(lambda: client.delete(message.receipt_handle))[0]


def rounds(client: Any, count: int) -> tuple[list[float], list[float]]:
    """`count` rounds of `receive_delete`: the receives' seconds and the deletes'."""
    pairs = [receive_delete(client) for _ in range(count)]
    return [receive for receive, _ in pairs], [delete for _, delete in pairs]


def first_line(child: subprocess.Popen[Any], seconds: float) -> str | bytes:
    """A child's first line of output, or "" when it says nothing within `seconds` (a hung
    start never hangs the benchmark)."""
    line: list[str | bytes] = []
    reader = threading.Thread(target=lambda: line.append(child.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(seconds)
    return line[0] if line else ""

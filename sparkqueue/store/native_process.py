"""The process the native engine runs in: delta-rs runs its I/O on a runtime that does not
survive fork(2), so a forked child is told to start its workers another way."""

from __future__ import annotations

import os

from ..errors import UnsupportedOperation

# The process whose delta-rs runtime this is: delta-rs runs its I/O on a runtime that does not
# survive fork(2), and a forked child would also inherit locks and group-commit rounds held by
# threads that did not come along (see `check_process`). A fact of the process, not of a broker.
_runtime_pid: int | None = None


def check_process() -> None:
    """Raises UnsupportedOperation, before any lock or commit round is entered, in a child
    forked from a process that had used delta-rs (where an operation would panic or hang)."""
    global _runtime_pid
    pid = os.getpid()
    if _runtime_pid is None:
        _runtime_pid = pid
    elif _runtime_pid != pid:
        raise UnsupportedOperation(
            f"this process ({pid}) was forked from process {_runtime_pid} after that one had"
            " used the native engine (delta-rs), whose runtime does not survive a fork: start"
            " worker processes with the 'spawn' or 'forkserver' start method"
            " (multiprocessing.get_context('spawn')), and open the broker in the worker"
        )

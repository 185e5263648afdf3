"""A process dying between two commits, as the tests stand it in: a BaseException (as SystemExit
and KeyboardInterrupt are), so no `except Exception` in the code under test, such as the redrive
pass's per-queue isolation, takes it for a failure it may carry on from."""

from __future__ import annotations


class Crash(BaseException):
    """Stands in for the process dying at this point."""


def crash_at(step: str):
    """A move's step hook (engine/moves/steps.py) that dies once `step` is reached."""

    def hook(reached: str, queue: str) -> None:
        if reached == step:
            raise Crash(f"{step} in {queue}")

    return hook

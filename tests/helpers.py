"""Helpers shared by test modules."""

from __future__ import annotations

import threading


def run_threads(targets) -> None:
    """Runs each target in its own thread; fails if any of them raised."""
    errors: list[BaseException] = []

    def guarded(target):
        try:
            target()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors

"""Compaction beside producers: on a local root, a broker merges the small files its own sends
leave in a queue table, on a thread of its own, once it has made COMPACT_AFTER_APPENDS appends
to it since (why only there: QueueContext.appended).

Every send (a round of several callers' sends) appends a file of its own, and every claim or
delete rewrites the files that hold its rows. Each statement on a table costs about 0.2 ms more
per file in it, so beside a steady producer the consumers slow down as files pile up, until the
redrive job's upkeep (hourly by default) compacts them: in one 45-second fair scenario the table
reached 480 files and the consumers fell from 130 to 56 msg/s. Merged into files of up to
SMALL_FILE_BYTES, the table stays at a few dozen files, and a claim rewrites little; larger files
are left as they are.

The compaction is one delta-rs commit (store/native_upkeep.py `compact_small`), alone under the
cross-process commit lock, so no transaction of any process is in flight on the table
meanwhile: tens of milliseconds (other processes' commits in flight finish first, within half a
second). A queue deleted through this broker first waits for its compaction (`settle`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...limits import COMPACT_AFTER_APPENDS

log = logging.getLogger(__name__)
THREAD_PREFIX = "sparkqueue-compact-"  # its threads' names: what waits for them finds them


class SmallFiles:
    """Per queue table, this broker's appends since its last compaction, and whether one runs."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._appends: dict[str, int] = {}
        self._running: set[str] = set()

    def appended(self, location: str, compact: Callable[[], None]) -> None:
        """An append to the table committed: `compact` runs on a thread of its own when due (one
        at a time per table; the appends go on counting meanwhile). Never raises: the append
        it follows has landed."""
        with self._lock:
            count = self._appends.get(location, 0) + 1
            if count < COMPACT_AFTER_APPENDS or location in self._running:
                self._appends[location] = count
                return
            self._appends[location] = 0
            self._running.add(location)
        # Not a daemon, even when started from one (a thread inherits its starter's flag): a
        # process that ends waits for it, as Python joins such threads before it finalizes. A
        # daemon thread still in delta-rs then was unwound through Rust frames: SIGSEGV at exit.
        try:
            threading.Thread(
                target=self._compact,
                args=(location, compact),
                name=f"{THREAD_PREFIX}{location}",
                daemon=False,
            ).start()
        except RuntimeError:  # no thread to be had (the interpreter is ending): not this time
            self._done(location)

    def settle(self, location: str) -> None:
        """Waits for the table's compaction, if one runs, and forgets its appends: the table is
        about to go (a queue deleted), and a compaction must not write into its folder after."""
        with self._lock:
            self._lock.wait_for(lambda: location not in self._running)
            self._appends.pop(location, None)

    def _compact(self, location: str, compact: Callable[[], None]) -> None:
        try:
            compact()
        except Exception:  # a disk that failed, a queue deleted elsewhere: the next one will do
            log.debug("compacting %s beside its consumers failed", location, exc_info=True)
        finally:
            self._done(location)

    def _done(self, location: str) -> None:
        with self._lock:
            self._running.discard(location)
            self._lock.notify_all()

"""An endpoint's regions, each with queues of its own, as SQS keeps them.

A request is in the region its signature is scoped to. The home region (`--region`, else
us-east-1) serves the broker's own root, and so does every request that names no region (an
unsigned one, or one signed for a name such as "local" or "elasticmq", as clients of local
emulators often are). Each other AWS region SQS serves (botocore's list: a bounded set, so no
client can make the server open roots without end) serves a root of its own under it,
`<root>/regions/<region>`, opened at its first request, or when the endpoint finds, after it
starts, that the region has queues from an earlier run; it has its own long polls, move tasks
and Spark broker. A name shaped like a region that botocore does not list is refused, as SQS's
endpoints refuse a region they do not serve, rather than served from the home root: a later
botocore would list it and move its queues. So a queue made through us-west-1 is not listed,
found or reached through us-west-2, and each region's ARNs name it. An endpoint pinned to one
region (`--region`) serves that region alone, and a broker in catalog mode keeps one namespace
for every region (a catalog schema has no folders under it).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable

import botocore.session

from ..broker import Broker
from .auth import region_refused
from .naming import Naming
from .service import Service

log = logging.getLogger(__name__)
# What an AWS region's name looks like (us-west-2, eu-central-1, us-gov-west-1, us-isob-east-1).
REGION_SHAPE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]+")
PROBE_RETRY_SECONDS = 60.0  # a region the storage did not answer for is looked for again after


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region SQS serves in any AWS partition, as the installed botocore knows them."""
    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("sqs", partition_name=partition)
    )


class Regions:
    """The home region's service, and each other region's, opened at its first need."""

    def __init__(
        self,
        broker: Broker,
        naming: Naming,
        open_spark: Callable[[], Broker] | None,
        *,
        apart: bool,
    ) -> None:
        """`apart`: other regions have roots of their own (a root, not pinned to a region)."""
        self.home = Service(broker, naming, open_spark=open_spark)
        self._apart = apart and broker.root is not None
        self._open_spark = open_spark
        self._others: dict[str, Service] = {}
        self._opening: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two maps, never held while a region opens
        self._stop = threading.Event()
        self._finder: threading.Thread | None = None

    def service(self, region: str | None) -> Service:
        """The service of the region a request is in."""
        if not self._apart or region is None or region == self.home.naming.arn_region:
            return self.home
        if region not in aws_regions():
            if REGION_SHAPE.fullmatch(region):
                raise region_refused(region)
            return self.home
        found = self._others.get(region)
        return found if found is not None else self._open(region)

    def pass_brokers(self) -> list[Callable[[], Broker]]:
        """What opens each region's broker for its redrive passes, the home region's first (each
        its own: one region's failure to open leaves the others' passes running). The first call
        starts looking for the regions that hold queues from an earlier run, on a thread of its
        own (a slow store holds up no pass); each region found joins the passes after it."""
        if self._apart and self._finder is None and self.home.broker.context.native is not None:
            self._finder = threading.Thread(target=self._find, name="regions", daemon=True)
            self._finder.start()
        with self._lock:
            services = [self.home, *self._others.values()]
        return [service.pass_broker for service in services]

    def close(self, seconds: float) -> None:
        """Each region's long polls answer now and its move tasks stop after their chunk under
        way; the search for regions stops after the region it is looking at. Waits up to
        `seconds` for the tasks and the search (see draining.py)."""
        deadline = time.monotonic() + seconds
        with self._lock:  # a region opened from now on is closed as it opens (`_open`)
            self._stop.set()
            services = [self.home, *self._others.values()]
        for service in services:
            service.polls.close()
        for service in services:
            service.tasks.close(max(0.0, deadline - time.monotonic()))
        if self._finder is not None:
            self._finder.join(max(0.0, deadline - time.monotonic()))

    def _find(self) -> None:
        """Opens each AWS region whose root has a registry (natively: a look that creates
        nothing); a region the storage did not answer for is looked for again later."""
        broker, warned = self.home.broker, set()
        unanswered = sorted(aws_regions() - {self.home.naming.arn_region})
        while unanswered and not self._stop.is_set():
            left = []
            for region in unanswered:
                if self._stop.is_set():
                    return
                try:
                    if broker.holds_queues(f"{broker.root}/regions/{region}"):
                        self._open(region)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as error:  # the storage's (a delta-rs panic too)
                    level = logging.DEBUG if region in warned else logging.WARNING
                    log.log(level, "looking for the region %s's queues failed: %s", region, error)
                    warned.add(region)
                    left.append(region)
            unanswered = left
            self._stop.wait(PROBE_RETRY_SECONDS if unanswered else 0)

    def _open(self, region: str) -> Service:
        """A region's service, opened once: a broker like the home one on the region's root,
        and the home region's Spark broker (its session) on that root where Spark is needed."""
        with self._lock:
            opening = self._opening.setdefault(region, threading.Lock())
        with opening:  # one region's opening (storage I/O) holds up no other region
            found = self._others.get(region)
            if found is not None:
                return found
            home, root = self.home, f"{self.home.broker.root}/regions/{region}"
            spark = None
            if self._open_spark is not None:
                spark = lambda: home.spark_broker().on_root(root)  # noqa: E731
            naming = Naming(home.naming.account, region)
            found = Service(home.broker.on_root(root), naming, open_spark=spark)
            with self._lock:
                self._others[region] = found
                closed = self._stop.is_set()
            if closed:  # opened for a request taken in before `close`, which missed it
                found.polls.close()
                found.tasks.close(0)
            return found

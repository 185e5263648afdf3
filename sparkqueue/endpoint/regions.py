"""An endpoint's regions, each with queues of its own, as SQS keeps them.

A request is in the region its signature is scoped to (an unsigned one, in the endpoint's home
region). The home region (`--region`, else us-east-1) serves the broker's own root; another region
serves a root of its own under it, `<root>/regions/<region>`, opened at its first request, with
its own long polls, move tasks and Spark broker. So a queue made through us-west-1 is not listed,
found or reached through us-west-2, and each region's ARNs name it. An endpoint pinned to one
region (`--region`) refuses requests signed for others before they reach here, and a broker in
catalog mode keeps one namespace for every region (a catalog schema has no folders under it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from ..broker import Broker
from .faults import SqsFault
from .naming import Naming
from .service import Service

# AWS's region names (us-east-1, eu-central-2, us-gov-west-1, ap-southeast-5...): the only ones
# that become a folder name.
REGION = re.compile(r"[a-z]{2}(?:-[a-z]{2,16}){1,3}-[0-9]{1,2}")


class Regions:
    """The home region's service, and each other region's, made at its first request."""

    def __init__(
        self, broker: Broker, naming: Naming, open_spark: Callable[[], Broker] | None
    ) -> None:
        self.home = Service(broker, naming, open_spark=open_spark)
        self._open_spark = open_spark
        self._others: dict[str, Service] = {}
        self._lock = threading.Lock()

    def service(self, region: str | None) -> Service:
        """The service of the region a request is in."""
        naming = self.home.naming
        if region is None or region == naming.arn_region or naming.region:
            return self.home
        root = self.home.broker.root
        if root is None:  # catalog mode: one namespace
            return self.home
        if not REGION.fullmatch(region):
            raise SqsFault(
                "SignatureDoesNotMatch",
                f"Credential should be scoped to a valid region, not '{region[:40]}'.",
            )
        with self._lock:
            found = self._others.get(region)
            if found is None:
                found = self._others[region] = self._open(region, f"{root}/regions/{region}")
            return found

    def services(self) -> list[Service]:
        """Every region's service opened so far, the home region's first."""
        with self._lock:
            return [self.home, *self._others.values()]

    def pass_brokers(self) -> list[Callable[[], Broker]]:
        """What opens each region's broker for its redrive passes (each its own: one region's
        failure to open leaves the others' passes running)."""
        return [service.pass_broker for service in self.services()]

    def _open(self, region: str, root: str) -> Service:
        """A region's service: a broker like the home one on the region's root, and the home
        region's Spark broker (its session) on that root where Spark is needed."""
        home = self.home
        spark = None if self._open_spark is None else (lambda: home.spark_broker().on_root(root))
        naming = Naming(home.naming.account, region)
        return Service(home.broker.on_root(root), naming, open_spark=spark)

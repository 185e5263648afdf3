"""Queue URLs and ARNs as SQS spells them: `http://host:port/<account>/<queue>` and
`arn:aws:sqs:<region>:<account>:<queue>`.

A `Naming` is one region's (regions.py: each region of an endpoint has queues of its own). SQS's
own URLs name a region in their host (`https://sqs.<region>.amazonaws.com/...`,
`https://<region>.queue.amazonaws.com/...`) and ARNs name one too: a URL or ARN of another
region names none of this region's queues; a URL whose host names no region (the endpoint's
own) names them. A Naming without a region (a catalog's endpoint, one namespace for every
region) takes any region's. A bare queue name is accepted as a QueueUrl, as SQS accepts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .faults import NO_QUEUE, SqsFault

DEFAULT_ACCOUNT = "000000000000"
DEFAULT_REGION = "us-east-1"
_ARN = re.compile(r"arn:aws:sqs:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):(?P<name>[^:/]+)")
# The region in an AWS SQS host name: sqs.<region>.amazonaws.com[.cn] or <region>.queue.amazonaws.com
_REGION_HOST = re.compile(
    r"(?:sqs\.(?P<a>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|(?P<b>[a-z0-9-]+)\.queue\.amazonaws\.com)"
)


@dataclass(frozen=True)
class Naming:
    """The account and region this endpoint plays, for the URLs and ARNs it hands out and reads.

    `region`: the region whose queues these are (ARNs say it; URLs and ARNs of another region
    name none of them); None: ARNs say DEFAULT_REGION and any region's name the same queues."""

    account: str = DEFAULT_ACCOUNT
    region: str | None = None

    @property
    def arn_region(self) -> str:
        return self.region or DEFAULT_REGION

    def url(self, origin: str, name: str) -> str:
        return f"{origin}/{self.account}/{name}"

    def arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.arn_region}:{self.account}:{name}"

    def name_of_url(self, url: str) -> str:
        """The queue a QueueUrl (a request path `/<account>/<queue>`, or a bare name) names."""
        parts = urlsplit(url)
        if not parts.scheme and "/" not in url:
            return url  # a bare queue name, as SQS takes it
        segments = [part for part in parts.path.split("/") if part]
        found = _REGION_HOST.fullmatch(parts.hostname or "")
        region = found and (found["a"] or found["b"])
        if len(segments) != 2 or segments[0] != self.account or not self._ours(region):
            raise SqsFault("QueueDoesNotExist", NO_QUEUE)  # another account's or region's
        return segments[1]

    def name_of_arn(self, arn: str, what: str = "the ARN") -> str:
        found = _ARN.fullmatch(arn)
        if found is None or found["account"] != self.account or not self._ours(found["region"]):
            raise SqsFault(
                "InvalidParameterValue",
                f"{what} {arn[:200]!r} is not an SQS queue ARN of account {self.account}"
                f" (arn:aws:sqs:{self.region or '<region>'}:{self.account}:<queue>)",
            )
        return found["name"]

    def _ours(self, region: str | None) -> bool:
        return region is None or self.region is None or region == self.region

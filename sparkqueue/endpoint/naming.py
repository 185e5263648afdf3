"""Queue URLs and ARNs as SQS spells them: `http://host:port/<account>/<queue>` and
`arn:aws:sqs:<region>:<account>:<queue>`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .faults import SqsFault

DEFAULT_ACCOUNT = "000000000000"
DEFAULT_REGION = "us-east-1"
_ARN = re.compile(r"arn:aws:sqs:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):(?P<name>[^:/]+)")


@dataclass(frozen=True)
class Naming:
    """The account and region this endpoint plays, for the URLs and ARNs it hands out and reads."""

    account: str = DEFAULT_ACCOUNT
    region: str = DEFAULT_REGION

    def url(self, origin: str, name: str) -> str:
        return f"{origin}/{self.account}/{name}"

    def arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}:{name}"

    def name_of_url(self, url: str) -> str:
        """The queue a QueueUrl (or a request path `/<account>/<queue>`) names."""
        parts = [part for part in urlsplit(url).path.split("/") if part]
        if len(parts) != 2 or parts[0] != self.account:
            raise SqsFault(
                "QueueDoesNotExist",
                f"the queue URL {url[:200]!r} names no queue of account {self.account} here",
            )
        return parts[1]

    def name_of_arn(self, arn: str, what: str = "the ARN") -> str:
        found = _ARN.fullmatch(arn)
        if found is None or found["account"] != self.account:
            raise SqsFault(
                "InvalidParameterValue",
                f"{what} {arn[:200]!r} is not an SQS queue ARN of account {self.account}"
                f" (arn:aws:sqs:<region>:{self.account}:<queue>)",
            )
        return found["name"]

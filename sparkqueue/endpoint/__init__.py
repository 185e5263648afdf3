"""An SQS-compatible HTTP endpoint over a broker's queues (`sparkqueue serve`): boto3, the AWS
CLI and every AWS SDK send and receive with the queues Spark jobs use."""

from .auth import ACCESS_KEYS_VARIABLE, AccessKeys
from .server import DEFAULT_PORT, SqsEndpoint

__all__ = ["ACCESS_KEYS_VARIABLE", "DEFAULT_PORT", "AccessKeys", "SqsEndpoint"]

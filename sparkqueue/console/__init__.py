"""The web console (`sparkqueue serve --console`, `sparkqueue console`): queues, dead letters and a
message's history in a browser, served under /console/ beside the SQS endpoint."""

from .app import Console
from .sessions import Sessions

__all__ = ["Console", "Sessions"]

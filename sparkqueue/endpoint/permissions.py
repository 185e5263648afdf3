"""AddPermission and RemovePermission as edits of a queue's stored access Policy, a JSON policy
document whose statements' Sid is the permission's Label (as SQS keeps them). The endpoint
stores the policy for clients that set and read it; access is decided by the endpoint's keys,
not by the policy."""

from __future__ import annotations

import json
import re
from typing import Any

from ..limits import MAX_POLICY_CHARACTERS
from .faults import SqsFault, invalid_value, missing_parameter

POLICY_VERSION = "2012-10-17"
MAX_ACTIONS = 7  # a permission names at most this many actions
SHOWN_ACCOUNTS = 10  # of refused AWSAccountIds, how many an error echoes
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ACCOUNT = re.compile(r"[0-9]{12}")
# The actions a permission may name (SQS's list; "*" for all of them).
ACTIONS = frozenset(
    {
        "*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
        "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue",
        "ListQueueTags",
    }
)  # fmt: skip


def added(
    policy: str | None, label: str, accounts: list[str], actions: list[str], queue_arn: str
) -> str:
    """The policy with a statement `label` letting `accounts` do `actions` on the queue."""
    if not _LABEL.fullmatch(label):
        raise SqsFault(
            "InvalidParameterValue", "Label is 1 to 80 characters of A-Z, a-z, 0-9, '-' and '_'"
        )
    if not accounts or not all(_ACCOUNT.fullmatch(a) for a in accounts):
        shown = f"[{', '.join(a[:20] for a in accounts[:SHOWN_ACCOUNTS])}]"
        raise SqsFault(
            "InvalidParameterValue", invalid_value(shown, "PrincipalId", "Unable to verify")
        )
    if not actions:
        raise SqsFault("MissingParameter", missing_parameter("Actions"))
    if len(actions) > MAX_ACTIONS:
        raise SqsFault(
            "OverLimit", f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS}."
        )
    unknown = [a for a in actions if a not in ACTIONS]
    if unknown:
        reason = "Only the queue owner is allowed to invoke this action"
        raise SqsFault(
            "InvalidParameterValue", invalid_value(f"SQS:{unknown[0][:80]}", "ActionName", reason)
        )
    document = _document(policy, queue_arn)
    statements = document["Statement"]
    if any(statement.get("Sid") == label for statement in statements):
        raise SqsFault("InvalidParameterValue", invalid_value(label, "Label", "Already exists"))
    statements.append(
        {
            "Sid": label,
            "Effect": "Allow",
            "Principal": {"AWS": _one_or_all([f"arn:aws:iam::{a}:root" for a in accounts])},
            "Action": _one_or_all([f"SQS:{action}" for action in actions]),
            "Resource": queue_arn,
        }
    )
    text = json.dumps(document)
    if len(text) > MAX_POLICY_CHARACTERS:
        raise SqsFault(
            "OverLimit", f"the queue's policy would exceed {MAX_POLICY_CHARACTERS} characters"
        )
    return text


def removed(policy: str | None, label: str) -> str | None:
    """The policy without the statement `label` (None when no statement is left)."""
    document = _document(policy)
    kept = [s for s in document["Statement"] if s.get("Sid") != label]
    if len(kept) == len(document["Statement"]):
        reason = "can't find label on existing policy"
        raise SqsFault("InvalidParameterValue", invalid_value(label[:80], "Label", reason))
    return json.dumps({**document, "Statement": kept}) if kept else None


def _one_or_all(values: list[str]) -> str | list[str]:
    """One principal or action as a plain string, several as a list: as SQS writes them."""
    return values[0] if len(values) == 1 else values


def _document(policy: str | None, queue_arn: str = "") -> dict[str, Any]:
    """The stored policy, or SQS's default one for a queue that has none."""
    fresh = {"Version": POLICY_VERSION, "Id": f"{queue_arn}/SQSDefaultPolicy"}
    document: dict[str, Any] = json.loads(policy) if policy else fresh
    statements = document.get("Statement", [])
    document["Statement"] = [statements] if isinstance(statements, dict) else list(statements)
    return document

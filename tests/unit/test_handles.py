"""Receipt handles: issued per receive, verified by MAC in constant time, every shard accepted."""

from __future__ import annotations

import hmac

import pytest

from sparkqueue.errors import ReceiptHandleIsInvalid
from sparkqueue.limits import MAX_SHARDS
from sparkqueue.rules import handles
from sparkqueue.rules.ids import new_message_id

SECRET = handles.new_token()
MESSAGE = new_message_id(1_700_000_000_000_000)


def test_a_handle_names_its_shard_and_message():
    handle = handles.issue(SECRET, handles.new_token(), 3, MESSAGE)
    assert handles.parse(SECRET, handle) == handles.HandleRef(handle, 3, MESSAGE)


def test_every_receive_issues_a_new_handle():
    assert handles.issue(SECRET, "a" * 32, 0, MESSAGE) != handles.issue(
        SECRET, "b" * 32, 0, MESSAGE
    )


@pytest.mark.parametrize("shard", range(MAX_SHARDS))
def test_every_shard_a_queue_may_have_parses(shard):
    handle = handles.issue(SECRET, handles.new_token(), shard, MESSAGE)
    assert handles.parse(SECRET, handle).shard == shard


@pytest.mark.parametrize(
    "handle",
    ["", "nonsense", None, 42, "01." + MESSAGE + "." + "0" * 32 + "." + "0" * 16],
    ids=["empty", "nonsense", "none", "number", "leading-zero-shard"],
)
def test_malformed_handles_are_rejected(handle):
    with pytest.raises(ReceiptHandleIsInvalid, match="malformed"):
        handles.parse(SECRET, handle)


def test_a_handle_of_another_queue_is_rejected():
    handle = handles.issue(handles.new_token(), handles.new_token(), 1, MESSAGE)
    with pytest.raises(ReceiptHandleIsInvalid, match="not issued by this queue"):
        handles.parse(SECRET, handle)


def test_the_mac_is_compared_in_constant_time(monkeypatch):
    compared: list[tuple[str, str]] = []
    constant_time = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr(handles.hmac, "compare_digest", spy)
    handles.parse(SECRET, handles.issue(SECRET, handles.new_token(), 2, MESSAGE))
    assert len(compared) == 1

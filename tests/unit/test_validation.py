"""SQS's message rules in Python; the Spark twins use the very same rule text."""

from __future__ import annotations

import re

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.rules import validation
from sparkqueue.rules.validation import (
    ATTRIBUTE_NAME_RULE,
    check_attributes,
    check_identifier,
    check_size,
    check_text,
    message_size,
)


@pytest.mark.parametrize("name", ["a", "order.id", "x-y_z", "A" * 256, "awsome", "Amazonian"])
def test_valid_attribute_names(name):
    assert check_attributes({name: "v"}) == {name: "v"}


@pytest.mark.parametrize(
    "name", ["", ".a", "a.", "a..b", "AWS.x", "aws.x", "Amazon.x", "a b", "A" * 257, "é"]
)
def test_invalid_attribute_names(name):
    with pytest.raises(InvalidParameterValue, match="attribute name"):
        check_attributes({name: "v"})


def test_attribute_values_and_bodies_refuse_characters_sqs_does_not_allow():
    for bad in ("\x00", "\ufffe", "a\x08"):
        with pytest.raises(InvalidParameterValue, match="U\\+"):
            check_text("the body", bad)
    assert check_text("the body", "tab\tnewline\nemoji \U0001f600") is not None


def test_at_most_ten_attributes():
    with pytest.raises(InvalidParameterValue, match="at most 10"):
        check_attributes({f"k{i}": "v" for i in range(11)})


@pytest.mark.parametrize("value", ["", "a b", "é", "x" * 129])
def test_invalid_identifiers(value):
    with pytest.raises(InvalidParameterValue):
        check_identifier("group_id", value)


def test_size_counts_utf8_bytes_of_body_and_attributes():
    assert message_size("é", {"k": "vv"}) == 2 + 1 + 2
    with pytest.raises(InvalidParameterValue, match="at most 1024"):
        check_size(1025, 1024)


def test_python_and_spark_share_the_rules():
    """The Spark patterns are the Python rules anchored for a search; Python compiles them too."""
    java = validation.whole_match_java(ATTRIBUTE_NAME_RULE)
    assert java == rf"^(?:{ATTRIBUTE_NAME_RULE})\z"
    assert re.compile(java.replace(r"\z", r"\Z")).match("order.id")
    assert not re.compile(java.replace(r"\z", r"\Z")).match("order.id\n")

"""SQS's message rules, written once as patterns and applied twice: in Python to single sends and
in Spark (Java regular expressions) to `send_df` rows, so the two can never disagree."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..attributes import QueueAttributes
from ..errors import InvalidParameterValue, MissingParameter, invalid_value
from ..limits import MAX_ATTRIBUTE_NAME_LENGTH, MAX_ATTRIBUTES, MAX_DELAY_SECONDS, MAX_ID_LENGTH

if TYPE_CHECKING:  # the Spark twins below import pyspark when they are called (send_df)
    from pyspark.sql import Column

# SQS accepts #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF in bodies and attribute values.
ALLOWED_CHARACTERS = ((0x9, 0x9), (0xA, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD),
                      (0x10000, 0x10FFFF))  # fmt: skip
# Attribute names: A-Z a-z 0-9 _ - . ; not starting or ending with '.', no '..', and not starting
# with 'AWS.' or 'Amazon.' in any case. Both regex engines read these bodies the same way.
ATTRIBUTE_NAME_RULE = (
    r"(?![.])(?!.*[.][.])(?!(?i:aws|amazon)[.])"
    rf"[A-Za-z0-9_.-]{{0,{MAX_ATTRIBUTE_NAME_LENGTH - 1}}}[A-Za-z0-9_-]"
)
# An attribute's SQS DataType: String, Number or Binary, with an optional custom label.
DATA_TYPE_RULE = rf"(String|Number|Binary)([.][A-Za-z0-9_.-]{{1,{MAX_ATTRIBUTE_NAME_LENGTH - 7}}})?"
# SQS's numbers: up to 38 significant digits, optionally signed, with a fraction and an exponent.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_DIGITS = 38
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
# Group and deduplication ids: alphanumerics and ASCII punctuation.
IDENTIFIER_RULE = rf"[!-~]{{1,{MAX_ID_LENGTH}}}"
# SQS's message system attributes a sender may set (String values), kept in `attribute_types`
# under "AWS.<name>": no attribute may have that name (the rule above), so the key never meets a
# message attribute, and `attributes` (their count, size and MD5) stays the sender's own.
SENDER_SYSTEM_ATTRIBUTES = ("AWSTraceHeader",)
SYSTEM_KEY_PREFIX = "AWS."


def system_key(name: str) -> str:
    """Where a message system attribute (AWSTraceHeader) is kept in `attribute_types`."""
    return SYSTEM_KEY_PREFIX + name


def _forbidden_class(escape: str) -> str:
    return (
        "[^"
        + "".join(f"{escape.format(lo)}-{escape.format(hi)}" for lo, hi in ALLOWED_CHARACTERS)
        + "]"
    )


_FORBIDDEN = re.compile(_forbidden_class(r"\U{:08x}"))
FORBIDDEN_JAVA = _forbidden_class(r"\x{{{:x}}}")
_ATTRIBUTE_NAME = re.compile(ATTRIBUTE_NAME_RULE)
_IDENTIFIER = re.compile(IDENTIFIER_RULE)
_DATA_TYPE = re.compile(DATA_TYPE_RULE)
# SQS's reason, in its own words, for a parameter a queue of this type does not take
WRONG_QUEUE_TYPE = "The request include parameter that is not valid for this queue type"


def whole_match_java(rule: str) -> str:
    """A rule as a Java pattern that must match the whole value (Spark's rlike searches)."""
    return rf"^(?:{rule})\z"


# ---- Python: single sends ---------------------------------------------------------------------------


def check_text(what: str, value: Any) -> str:
    """A body or attribute value: a non-empty str of characters SQS allows."""
    if not isinstance(value, str):
        raise InvalidParameterValue(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidParameterValue(f"{what} must not be empty")
    bad = _FORBIDDEN.search(value)
    if bad:
        raise InvalidParameterValue(
            f"{what} contains the character U+{ord(bad.group()):04X}, which SQS does not allow"
            " (allowed: tab, newline, carriage return and Unicode from U+0020 except surrogates,"
            " U+FFFE and U+FFFF)"
        )
    return value


def check_attributes(attributes: Any) -> dict[str, str]:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise InvalidParameterValue(
            f"attributes must be a dict of str to str, got {type(attributes).__name__}"
        )
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidParameterValue(
            f"a message may carry at most {MAX_ATTRIBUTES} attributes, got {len(attributes)}"
        )
    for name, value in attributes.items():
        if not isinstance(name, str) or not _ATTRIBUTE_NAME.fullmatch(name):
            raise InvalidParameterValue(
                f"invalid attribute name {name!r}: use 1 to {MAX_ATTRIBUTE_NAME_LENGTH} characters"
                " of A-Z, a-z, 0-9, '_', '-' and '.', not starting or ending with '.', without"
                " '..', and not starting with 'AWS.' or 'Amazon.'",
                sqs_message=f"The message attribute name '{str(name)[:MAX_ATTRIBUTE_NAME_LENGTH]}' is invalid. Attribute name can"
                " contain A-Z, a-z, 0-9, underscore (_), hyphen (-), and period (.) characters.",
            )
        check_text(f"attribute {name!r}", value)
    return dict(attributes)


def check_attribute_types(types: Any, attributes: dict[str, str]) -> dict[str, str]:
    """SQS DataTypes for some of `attributes` (the rest are plain strings): a Number's value must
    be a number, a Binary's base64 text. Plain "String" entries are dropped: absent means String.
    A `system_key` entry holds a message system attribute's value instead."""
    if types is None:
        return {}
    if not isinstance(types, dict):
        raise InvalidParameterValue(
            f"attribute_types must be a dict of attribute name to SQS DataType, got"
            f" {type(types).__name__}"
        )
    kept: dict[str, str] = {}
    for name, data_type in types.items():
        if isinstance(name, str) and name.startswith(SYSTEM_KEY_PREFIX):
            if name[len(SYSTEM_KEY_PREFIX) :] not in SENDER_SYSTEM_ATTRIBUTES:
                raise InvalidParameterValue(
                    f"attribute_types names {name!r}; the system attributes a message may carry"
                    f" are {[system_key(n) for n in SENDER_SYSTEM_ATTRIBUTES]}"
                )
            kept[name] = check_text(f"the system attribute {name!r}", data_type)
            continue
        if name not in attributes:
            raise InvalidParameterValue(
                f"attribute_types names {name!r}, which is not one of the message's attributes"
            )
        if not isinstance(data_type, str) or not _DATA_TYPE.fullmatch(data_type):
            raise InvalidParameterValue(
                f"attribute {name!r} has the DataType {data_type!r}; allowed: String, Number or"
                " Binary, optionally followed by '.' and a label of A-Z, a-z, 0-9, '_', '-', '.'",
                sqs_message=f"The message attribute '{name}' has an invalid message attribute"
                " type, the set of supported type prefixes is Binary, Number, and String.",
            )
        value = attributes[name]
        if data_type.startswith("Number") and not _is_number(value):
            raise InvalidParameterValue(
                f"attribute {name!r} is a Number but its value {value!r} is not a number of at"
                f" most {_MAX_NUMBER_DIGITS} significant digits"
            )
        if data_type.startswith("Binary") and not _BASE64.fullmatch(value):
            raise InvalidParameterValue(f"attribute {name!r} is Binary: its value must be base64")
        if data_type != "String":
            kept[name] = data_type
    return kept


def _is_number(value: str) -> bool:
    if not _NUMBER.fullmatch(value):
        return False
    mantissa = value.lstrip("+-").split("e")[0].split("E")[0].replace(".", "")
    return len(mantissa.strip("0")) <= _MAX_NUMBER_DIGITS


def check_identifier(what: str, value: Any) -> str | None:
    """A group or deduplication id (None when not given)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise InvalidParameterValue(
            f"{what} must be 1 to {MAX_ID_LENGTH} characters of ASCII letters, digits and"
            f" punctuation, got {value!r}"
        )
    return value


def message_size(body: str, attributes: dict[str, str]) -> int:
    """SQS's size: UTF-8 bytes of the body plus every attribute name and value."""
    return len(body.encode("utf-8")) + sum(
        len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in attributes.items()
    )


def check_size(size: int, limit: int) -> None:
    if size > limit:
        raise InvalidParameterValue(
            f"the message is {size} bytes (UTF-8 body plus attribute names and values);"
            f" the queue allows at most {limit} (max_message_bytes)"
        )


# ---- Spark: send_df rows ----------------------------------------------------------------------------


def size_column(body: Column, attributes: Column) -> Column:
    from pyspark.sql import functions as F

    attribute_bytes = F.aggregate(
        F.coalesce(F.map_entries(attributes), F.array()),
        F.lit(0),
        lambda acc, e: acc + F.octet_length(e["key"]) + F.octet_length(e["value"]),
    )
    return F.octet_length(body) + attribute_bytes


def row_problem_column(
    body: Column,
    attributes: Column,
    group_id: Column,
    deduplication_id: Column,
    delay: Column,
    max_message_bytes: int,
) -> Column:
    """Null for a valid row, else a sentence saying what is wrong with it."""
    from pyspark.sql import functions as F

    bad_attribute = F.exists(
        F.coalesce(F.map_entries(attributes), F.array()),
        lambda e: (
            ~e["key"].rlike(whole_match_java(ATTRIBUTE_NAME_RULE))
            | e["value"].isNull()
            | (F.length(e["value"]) == 0)
            | e["value"].rlike(FORBIDDEN_JAVA)
        ),
    )
    return (
        F.when(body.isNull() | (F.length(body) == 0), F.lit("the body is null or empty"))
        .when(body.rlike(FORBIDDEN_JAVA), F.lit("the body contains a character SQS does not allow"))
        .when(
            F.coalesce(F.size(attributes), F.lit(0)) > MAX_ATTRIBUTES,
            F.lit(f"more than {MAX_ATTRIBUTES} attributes"),
        )
        .when(bad_attribute, F.lit("an attribute name or value is invalid"))
        .when(
            size_column(body, attributes) > max_message_bytes,
            F.lit(f"the message exceeds max_message_bytes ({max_message_bytes})"),
        )
        .when(_bad_identifier(group_id), F.lit("the group id is invalid"))
        .when(_bad_identifier(deduplication_id), F.lit("the deduplication id is invalid"))
        .when(
            delay.isNull() | (delay < 0) | (delay > MAX_DELAY_SECONDS),
            F.lit(f"delay_seconds is not from 0 to {MAX_DELAY_SECONDS}"),
        )
    )


def _bad_identifier(column: Column) -> Column:
    return column.isNotNull() & ~column.rlike(whole_match_java(IDENTIFIER_RULE))


def check_fifo_options(
    delay: Any,
    group_id: str | None,
    deduplication_id: str | None,
    attrs: QueueAttributes,
    how: str = "",
) -> None:
    """SQS's FIFO rules for what a send must and must not carry."""
    if delay is not None and (isinstance(delay, bool) or delay != 0):  # an explicit 0 is fine
        raise InvalidParameterValue(
            "FIFO queues take no per-message delay_seconds other than 0; set the queue's"
            " delay_seconds instead",
            sqs_message=invalid_value(delay, "DelaySeconds", WRONG_QUEUE_TYPE),
        )
    if group_id is None:
        raise MissingParameter(f"a FIFO queue needs group_id{how} for every message")
    if deduplication_id is None and not attrs.content_based_deduplication:
        raise MissingParameter(
            f"a FIFO queue needs deduplication_id{how} for every message unless the queue has"
            " content_based_deduplication=True"
        )

"""Message-level input rules (SQS's), checked in Python for single sends and in Spark for DataFrames."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from .errors import InvalidParameterValue

MAX_ATTRIBUTES = 10
MAX_ID_LENGTH = 128
MAX_DELAY_SECONDS = 900

# SQS accepts #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF in bodies and attribute values.
_FORBIDDEN_CHARS_JAVA = r"[^\x{9}\x{A}\x{D}\x{20}-\x{D7FF}\x{E000}-\x{FFFD}\x{10000}-\x{10FFFF}]"
_FORBIDDEN_CHARS = re.compile(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
# Group and deduplication ids: SQS allows alphanumerics and ASCII punctuation.
_ID_CHARS = re.compile(r"[!-~]{1,128}")


def check_text(what: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidParameterValue(f"{what} must be a str, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidParameterValue(f"{what} must not be empty")
    bad = _FORBIDDEN_CHARS.search(value)
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
        if not isinstance(name, str) or not _ATTRIBUTE_NAME.fullmatch(name) or _bad_name(name):
            raise InvalidParameterValue(
                f"invalid attribute name {name!r}: use 1 to 256 characters of A-Z, a-z, 0-9, '_',"
                " '-' and '.', not starting or ending with '.', without '..', and not starting"
                " with 'AWS.' or 'Amazon.'"
            )
        check_text(f"attribute {name!r}", value)
    return dict(attributes)


def _bad_name(name: str) -> bool:
    lowered = name.lower()
    return (
        name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or lowered.startswith(("aws.", "amazon."))
    )


def check_identifier(what: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ID_CHARS.fullmatch(value):
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


# ---- the same rules as Spark columns, for send_df ----------------------------------------------


def size_column(body: Column, attributes: Column) -> Column:
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
    bad_attribute = F.exists(
        F.coalesce(F.map_entries(attributes), F.array()),
        lambda e: (
            (~e["key"].rlike(r"^[A-Za-z0-9_.-]{1,256}$"))
            | e["key"].startswith(".")
            | e["key"].endswith(".")
            | e["key"].contains("..")
            | F.lower(e["key"]).startswith("aws.")
            | F.lower(e["key"]).startswith("amazon.")
            | e["value"].isNull()
            | (F.length(e["value"]) == 0)
            | e["value"].rlike(_FORBIDDEN_CHARS_JAVA)
        ),
    )
    return (
        F.when(body.isNull() | (F.length(body) == 0), F.lit("the body is null or empty"))
        .when(
            body.rlike(_FORBIDDEN_CHARS_JAVA),
            F.lit("the body contains a character SQS does not allow"),
        )
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
    return column.isNotNull() & ~column.rlike(r"^[!-~]{1,128}$")

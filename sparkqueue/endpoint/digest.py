"""The MD5 digests SQS returns with every sent and received message, computed as SQS does.

SDKs compare them with their own (the Java and .NET SDKs reject a mismatch), so they are exact:
the body's digest is over its UTF-8 bytes; the attributes' over each attribute, sorted by name,
as length-prefixed name, data type, a transport byte (1 string, 2 binary) and length-prefixed value.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

STRING_TRANSPORT = 1
BINARY_TRANSPORT = 2


@dataclass(frozen=True)
class TypedValue:
    """One SQS message attribute: its DataType and its value (str, or bytes for Binary types)."""

    data_type: str
    value: str | bytes

    @property
    def is_binary(self) -> bool:
        return self.data_type.startswith("Binary")


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def md5_of_attributes(attributes: dict[str, TypedValue]) -> str | None:
    """None when there are none (SQS then leaves MD5OfMessageAttributes out)."""
    if not attributes:
        return None
    digest = hashlib.md5()
    for name in sorted(attributes):
        attribute = attributes[name]
        digest.update(_prefixed(name.encode("utf-8")))
        digest.update(_prefixed(attribute.data_type.encode("utf-8")))
        if attribute.is_binary:
            digest.update(bytes([BINARY_TRANSPORT]))
            value = attribute.value
            digest.update(_prefixed(value if isinstance(value, bytes) else value.encode("utf-8")))
        else:
            digest.update(bytes([STRING_TRANSPORT]))
            digest.update(_prefixed(str(attribute.value).encode("utf-8")))
    return digest.hexdigest()


def _prefixed(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data

"""SQS's two wire protocols, read and written with botocore's model of the SQS API.

The AWS JSON 1.0 protocol (`X-Amz-Target: AmazonSQS.<Action>`, a JSON body) is what current SDKs
send; the query protocol (a form-encoded `Action=...` body answered in XML) is what older ones
send. Both become one `Call` of the action's JSON-shaped parameters (blobs as bytes, numbers as
ints), checked against the model's types, so the actions never see the protocol.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl
from xml.etree import ElementTree

import botocore.session
from botocore.model import OperationModel, ServiceModel, Shape, StructureShape

from .faults import SqsFault

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
XML_CONTENT_TYPE = "text/xml"
TARGET_PREFIX = "AmazonSQS."
XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"

# The query protocol's names for members that hold lists or maps (the model's member names are
# the JSON protocol's). A list of structures is named after its member shape instead.
QUERY_NAMES = {
    "Attributes": "Attribute",
    "AttributeNames": "AttributeName",
    "MessageAttributes": "MessageAttribute",
    "MessageAttributeNames": "MessageAttributeName",
    "MessageSystemAttributes": "MessageSystemAttribute",
    "MessageSystemAttributeNames": "MessageSystemAttributeName",
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Tags": "Tag",
    "tags": "Tag",
    "TagKeys": "TagKey",
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}
# A map entry's key element, by the map's shape: tags name theirs Key, the rest Name.
MAP_KEY_NAMES = {"TagMap": "Key"}


@dataclass(frozen=True)
class Call:
    """One request: the action, its parameters in the JSON protocol's shape, and its protocol."""

    action: str
    params: dict[str, Any]
    protocol: str  # "json" or "query"
    operation: OperationModel


@functools.cache
def service_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("sqs")


def operation(action: str) -> OperationModel:
    model = service_model()
    if action not in model.operation_names:
        raise SqsFault(
            "InvalidAction", f"the action {action[:64]!r} is not an SQS action this endpoint knows"
        )
    return model.operation_model(action)


# -- reading ---------------------------------------------------------------------------------------


def decode(target: str | None, body: bytes, query_string: str = "") -> Call:
    """The call a request makes: JSON when it names an `X-Amz-Target`, else the query protocol
    (form fields from the body, or from the URL's query string)."""
    if target is not None:
        if not target.startswith(TARGET_PREFIX):
            raise SqsFault("InvalidAction", f"X-Amz-Target must be {TARGET_PREFIX}<Action>")
        op = operation(target[len(TARGET_PREFIX) :])
        try:
            document = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise SqsFault("SerializationException", "the request body is not JSON") from None
        params = _from_json(op.input_shape, document, "the request")
        return Call(op.name, params, "json", op)
    form = _form(body, query_string)
    action = form.pop("Action", None)
    if action is None:
        raise SqsFault("MissingParameter", "the request names no Action")
    form.pop("Version", None)
    op = operation(action)
    params = _from_query(op.input_shape, form, "") if op.input_shape is not None else {}
    return Call(op.name, params, "query", op)


def _form(body: bytes, query_string: str) -> dict[str, str]:
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(query_string, keep_blank_values=True, strict_parsing=False)
        pairs += parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
    except (UnicodeDecodeError, ValueError):
        raise SqsFault("SerializationException", "the form body is malformed") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form:
            raise SqsFault("SerializationException", f"the parameter {key[:64]!r} appears twice")
        form[key] = value
    return form


def _from_json(shape: Shape | None, value: Any, where: str) -> Any:
    kind = shape.type_name if shape is not None else "structure"
    if kind == "structure":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
        members = shape.members if shape is not None else {}
        return {
            name: _from_json(members[name], item, name)
            for name, item in value.items()
            if name in members and item is not None
        }
    if kind == "list":
        if not isinstance(value, list):
            raise _wrong_type(where, "a list")
        return [_from_json(shape.member, item, where) for item in value]  # type: ignore[union-attr]
    if kind == "map":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
        return {
            _from_json(shape.key, key, where): _from_json(shape.value, item, f"{where}.{key}")  # type: ignore[union-attr]
            for key, item in value.items()
        }
    if kind == "string":
        if not isinstance(value, str):
            raise _wrong_type(where, "a string")
        return value
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(where, "an integer")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _wrong_type(where, "true or false")
        return value
    if kind == "blob":
        if not isinstance(value, str):
            raise _wrong_type(where, "base64 text")
        return _base64(value, where)
    raise _wrong_type(where, kind)


def _from_query(shape: StructureShape, form: dict[str, str], prefix: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, member in shape.members.items():
        key = f"{prefix}{query_name(name, member)}"
        value = _query_value(member, name, form, key)
        if value is not None:
            params[name] = value
    return params


def _query_value(shape: Shape, name: str, form: dict[str, str], key: str) -> Any:
    kind = shape.type_name
    if kind == "structure":
        if not any(k.startswith(key + ".") for k in form):
            return None
        return _from_query(shape, form, key + ".")  # type: ignore[arg-type]
    if kind == "list":
        element = key if shape.serialization.get("flattened") else f"{key}.member"
        items = []
        for index in _indexes(form, element):
            items.append(_query_value(shape.member, name, form, f"{element}.{index}"))  # type: ignore[attr-defined]
        return items or None
    if kind == "map":
        entries = {}
        key_name = MAP_KEY_NAMES.get(shape.name, "Name")
        for index in _indexes(form, key):
            entry_key = form.get(f"{key}.{index}.{key_name}")
            if entry_key is None:
                raise SqsFault("MissingParameter", f"{key}.{index}.{key_name} is missing")
            entries[entry_key] = _query_value(shape.value, name, form, f"{key}.{index}.Value")  # type: ignore[attr-defined]
        return entries or None
    text = form.get(key)
    if text is None:
        return None
    if kind in ("integer", "long"):
        if not re.fullmatch(r"-?[0-9]{1,18}", text):
            raise SqsFault("InvalidParameterValue", f"{key} must be an integer, got {text[:40]!r}")
        return int(text)
    if kind == "boolean":
        if text not in ("true", "false"):
            raise SqsFault("InvalidParameterValue", f"{key} must be true or false")
        return text == "true"
    if kind == "blob":
        return _base64(text, key)
    return text


def _indexes(form: dict[str, str], key: str) -> list[int]:
    """The N of every `key.N` or `key.N.<...>` the form holds, in order."""
    pattern = re.compile(re.escape(key) + r"\.([0-9]{1,4})(?:\.|$)")
    found = {int(m.group(1)) for k in form if (m := pattern.match(k))}
    return sorted(found)


def _base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SqsFault("InvalidParameterValue", f"{where} must be base64 text") from None


def _wrong_type(where: str, expected: str) -> SqsFault:
    return SqsFault("SerializationException", f"{where[:64]} must be {expected}")


def query_name(member: str, shape: Shape) -> str:
    if shape.type_name == "list" and shape.member.type_name == "structure":  # type: ignore[attr-defined]
        return shape.member.name  # type: ignore[attr-defined]
    return QUERY_NAMES.get(member, member)


# -- writing ---------------------------------------------------------------------------------------


def encode_result(call: Call, result: dict[str, Any] | None, request_id: str) -> tuple[str, bytes]:
    """The content type and body answering `call` with `result` (the output shape's members)."""
    output = call.operation.output_shape
    if call.protocol == "json":
        document = _to_json(output, result or {}) if output is not None else {}
        return JSON_CONTENT_TYPE, json.dumps(document).encode("utf-8")
    root = ElementTree.Element(f"{call.action}Response", xmlns=XML_NAMESPACE)
    if output is not None:
        _to_xml(ElementTree.SubElement(root, f"{call.action}Result"), output, result or {})
    metadata = ElementTree.SubElement(root, "ResponseMetadata")
    ElementTree.SubElement(metadata, "RequestId").text = request_id
    return XML_CONTENT_TYPE, _xml_bytes(root)


def encode_fault(fault: SqsFault, protocol: str, request_id: str) -> tuple[dict[str, str], bytes]:
    """Headers and body of an error answer in the request's protocol."""
    kind = fault.kind
    fault_type = "Sender" if kind.sender else "Receiver"
    if protocol == "json":
        headers = {
            "Content-Type": JSON_CONTENT_TYPE,
            "x-amzn-query-error": f"{kind.code};{fault_type}",
        }
        document = {"__type": f"com.amazonaws.sqs#{kind.name}", "message": fault.message}
        return headers, json.dumps(document).encode("utf-8")
    root = ElementTree.Element("ErrorResponse", xmlns=XML_NAMESPACE)
    error = ElementTree.SubElement(root, "Error")
    for tag, text in (("Type", fault_type), ("Code", kind.code), ("Message", fault.message)):
        ElementTree.SubElement(error, tag).text = text
    ElementTree.SubElement(error, "Detail")
    ElementTree.SubElement(root, "RequestId").text = request_id
    return {"Content-Type": XML_CONTENT_TYPE}, _xml_bytes(root)


def _to_json(shape: Shape, value: Any) -> Any:
    kind = shape.type_name
    if kind == "structure":
        return {
            name: _to_json(member, value[name])
            for name, member in shape.members.items()  # type: ignore[attr-defined]
            if value.get(name) is not None
        }
    if kind == "list":
        return [_to_json(shape.member, item) for item in value]  # type: ignore[attr-defined]
    if kind == "map":
        return {key: _to_json(shape.value, item) for key, item in value.items()}  # type: ignore[attr-defined]
    if kind == "blob":
        return base64.b64encode(value).decode("ascii")
    return value


def _to_xml(parent: ElementTree.Element, shape: Shape, value: dict[str, Any]) -> None:
    for name, member in shape.members.items():  # type: ignore[attr-defined]
        item = value.get(name)
        if item is None:
            continue
        tag = query_name(name, member)
        if member.type_name == "list":
            for element in item:
                _xml_value(ElementTree.SubElement(parent, tag), member.member, element)
        elif member.type_name == "map":
            for key, element in item.items():
                entry = ElementTree.SubElement(parent, tag)
                ElementTree.SubElement(entry, MAP_KEY_NAMES.get(member.name, "Name")).text = key
                _xml_value(ElementTree.SubElement(entry, "Value"), member.value, element)
        else:
            _xml_value(ElementTree.SubElement(parent, tag), member, item)


def _xml_value(element: ElementTree.Element, shape: Shape, value: Any) -> None:
    kind = shape.type_name
    if kind == "structure":
        _to_xml(element, shape, value)
    elif kind == "boolean":
        element.text = "true" if value else "false"
    elif kind == "blob":
        element.text = base64.b64encode(value).decode("ascii")
    else:
        element.text = str(value)


def _xml_bytes(root: ElementTree.Element) -> bytes:
    # XML parsers turn a literal carriage return into a newline: send it as a character reference.
    text = ElementTree.tostring(root, encoding="unicode").replace("\r", "&#13;")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text).encode("utf-8")

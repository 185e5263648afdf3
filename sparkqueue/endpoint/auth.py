"""AWS Signature Version 4 checks for the endpoint, with botocore's own signer.

The server recomputes the signature of each request from the headers the client says it signed,
the body and the secret of the access key named in the credential scope; a request passes only
when the two agree and its date is within SQS's 15 minutes of the server's clock.

A signature only protects what it covers, and whoever captures a signed request may replay it
for 15 minutes with anything it does not cover changed. So the headers that decide what a request
does must be signed (Host, X-Amz-Target, Content-Type and every X-Amz-* header present), and the
payload hash is always the body's own SHA-256: a signed `X-Amz-Content-SHA256` (which the JS SDK
sends, and which botocore's signer takes as the hash) must equal it, and `UNSIGNED-PAYLOAD` is
refused. The headers come from the server's one lower-cased map (`transport.Headers`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from ..errors import InvalidParameterValue
from .faults import SqsFault
from .transport import Headers

ACCESS_KEYS_VARIABLE = "SPARKQUEUE_ACCESS_KEYS"
SIGNING_SERVICE = "sqs"
MAX_CLOCK_SKEW = timedelta(minutes=15)
# Headers that must be signed whenever present (and every x-amz-* one): what the request does.
MUST_SIGN = ("host", "x-amz-target", "content-type")
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>[0-9]{8})/(?P<region>[^/,\s]+)"
    r"/(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<headers>[a-z0-9;_.-]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})"
)
_KEY = re.compile(r"[A-Za-z0-9_+=,.@-]{1,128}")


@dataclass(frozen=True)
class AccessKeys:
    """The access keys the server accepts (key id -> secret); empty: requests are not checked."""

    secrets: Mapping[str, str]

    @classmethod
    def parse(cls, text: str) -> AccessKeys:
        """`key:secret[,key:secret...]` (whitespace and newlines also separate pairs)."""
        secrets: dict[str, str] = {}
        for pair in re.split(r"[,\s]+", text.strip()):
            if not pair:
                continue
            key, sep, secret = pair.partition(":")
            if not sep or not _KEY.fullmatch(key) or not secret:
                raise InvalidParameterValue(
                    "access keys are key:secret pairs separated by commas, keys of letters,"
                    f" digits and _+=,.@- ; got a pair starting {pair[:8]!r}"
                )
            secrets[key] = secret
        return cls(secrets)

    @classmethod
    def configured(cls, keys_file: str | None = None) -> AccessKeys:
        """From `keys_file` (one key:secret per line) when given, else $SPARKQUEUE_ACCESS_KEYS."""
        if keys_file is not None:
            return cls.parse(Path(keys_file).read_text())
        return cls.parse(os.environ.get(ACCESS_KEYS_VARIABLE, ""))

    def __bool__(self) -> bool:
        return bool(self.secrets)


def region_refused(region: str) -> SqsFault:
    """SQS's answer to a signature scoped to a region this endpoint does not serve."""
    return SqsFault(
        "SignatureDoesNotMatch",
        f"Credential should be scoped to a valid region, not '{region[:40]}'.",
    )


def signed_region(headers: Headers) -> str | None:
    """The region a request's signature is scoped to (None for an unsigned request): the region
    whose queues it addresses, as SQS's regional endpoints see it. Checked with the signature
    where the endpoint has keys; without keys (localhost only) read as given."""
    authorization = headers.get("authorization")
    found = _AUTHORIZATION.fullmatch(authorization.strip()) if authorization else None
    return found["region"] if found else None


def check_signature(
    keys: AccessKeys,
    method: str,
    url: str,
    headers: Headers,
    body: bytes,
    now: datetime,
    region: str | None = None,
) -> str | None:
    """The access key that signed the request (None when no keys are configured); SqsFault when
    the request is unsigned, signed with an unknown key, for another region than the endpoint's
    (`region`: pinned), badly signed, signed over too little or too old. `url` is the request's
    URL as the client addressed it (the Host header's)."""
    if not keys:
        return None
    found, secret, stamp, names = check_credentials(keys, headers, now, region)
    payload = hashlib.sha256(body).hexdigest()
    claimed = headers.get("x-amz-content-sha256")
    if claimed is not None and claimed.lower() != payload:
        raise SqsFault(
            "SignatureDoesNotMatch",
            "X-Amz-Content-SHA256 must be the SHA-256 of the body (UNSIGNED-PAYLOAD is refused)",
        )
    signed = {name: headers.values[name] for name in names}
    request = AWSRequest(method=method, url=url, data=body, headers=signed)
    request.context["timestamp"] = stamp
    signer = _Verifier(
        Credentials(found["key"], secret), found["service"], found["region"], signed, payload
    )
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    if found["service"] != SIGNING_SERVICE or not hmac.compare_digest(expected, found["signature"]):
        raise SqsFault(
            "SignatureDoesNotMatch", "the request signature does not match the one computed"
        )
    return found["key"]


def check_credentials(
    keys: AccessKeys, headers: Headers, now: datetime, region: str | None = None
) -> tuple[re.Match[str], str, str, list[str]]:
    """Everything a signature check can tell from the head alone (a known key, a fresh date,
    every header that must be signed named): checked before a body is read, so that a client
    without a key cannot make the server take in megabytes. The Authorization's parts, the
    key's secret, the date stamp and the signed header names."""
    authorization = headers.get("authorization")
    if authorization is None:
        raise SqsFault(
            "MissingAuthenticationToken", "the request is not signed (AWS Signature Version 4)"
        )
    found = _AUTHORIZATION.fullmatch(authorization.strip())
    if found is None:
        raise SqsFault("IncompleteSignature", "the Authorization header is not a SigV4 signature")
    secret = keys.secrets.get(found["key"])
    if secret is None:
        raise SqsFault("InvalidClientTokenId", "the access key is not one this server accepts")
    if region is not None and found["region"] != region:  # as SQS's regional endpoints refuse it
        raise region_refused(found["region"])
    stamp = headers.get("x-amz-date") or ""
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SqsFault("IncompleteSignature", "X-Amz-Date is missing or malformed") from None
    if abs(now - signed_at) > MAX_CLOCK_SKEW or stamp[:8] != found["date"]:
        raise SqsFault("RequestExpired", "the request's date is over 15 minutes from the server's")
    names = found["headers"].split(";")
    unsigned = sorted(
        name
        for name in headers.values
        if (name in MUST_SIGN or name.startswith("x-amz-")) and name not in names
    )
    if "host" not in names or unsigned:
        raise SqsFault(
            "IncompleteSignature",
            f"the signature must cover the Host header and {', '.join(MUST_SIGN[1:])} and every"
            f" X-Amz-* header present; it leaves out {', '.join(unsigned) or 'host'}",
        )
    absent = [name for name in names if name not in headers]
    if absent:
        raise SqsFault(
            "IncompleteSignature", f"the request lacks the signed header(s) {', '.join(absent)}"
        )
    return found, secret, stamp, names


class _Verifier(SigV4Auth):
    """botocore's SigV4 computation over exactly the headers the client signed and the body's own
    hash. botocore's client-side choices (headers it never signs, such as User-Agent; a payload
    hash taken from X-Amz-Content-SHA256, or UNSIGNED-PAYLOAD over https) are for signing a
    request, not for checking one that another SDK signed."""

    def __init__(
        self,
        credentials: Credentials,
        service: str,
        region: str,
        signed: Mapping[str, str],
        payload: str,
    ) -> None:
        super().__init__(credentials, service, region)
        self._signed = signed
        self._payload = payload

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        chosen = HTTPHeaders()
        for name, value in self._signed.items():
            chosen[name] = value
        return chosen

    def payload(self, request: AWSRequest) -> str:
        return self._payload

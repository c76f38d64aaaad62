"""The check-back endpoint's core: verifying trustmsg's signed call
(Standard Webhooks), parsing it, and answering it.

The framework glue is :mod:`trustmsg.asgi` (Starlette, FastAPI, any ASGI
server) and :mod:`trustmsg.wsgi` (Flask, Django, any WSGI server).

Verification is the stdlib's HMAC-SHA256, by the scheme of
``docs/check-back.md``: the three ``webhook-*`` headers are required, the
timestamp must be an integer within 5 minutes of our clock either way, and
one ``v1,`` entry of ``webhook-signature`` must equal
``base64(HMAC-SHA256(key, "<id>.<timestamp>.<raw body>"))``, compared in
constant time, over the raw body bytes as received. (The ``standardwebhooks``
package does the same but brings attrs, python-dateutil and Deprecated along
and takes its clock from the system only; this is 40 lines with none.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from .errors import InvalidSignatureError
from .message import DECISIONS

__all__ = [
    "DEFAULT_PATH",
    "DEFAULT_TOLERANCE",
    "CheckBackHandler",
    "CheckRequest",
    "Response",
    "sign",
    "verify",
]

log = logging.getLogger(__name__)

DEFAULT_PATH = "/trustmsg/check"
DEFAULT_TOLERANCE = 5 * 60
MAX_BODY = 64 * 1024
_TIMESTAMP = re.compile(r"[+-]?[0-9]{1,18}")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a signing secret ``whsec_<base64>`` (the base64 part, decoded)."""
    if not isinstance(secret, str):
        raise ValueError("the signing secret must be a str, whsec_<base64>")
    raw = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "the signing secret is not whsec_<base64>: use the registration's signing_secret"
        ) from None
    if not key:
        raise ValueError("the signing secret is empty")
    return key


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value (``v1,<base64>``) trustmsg sends for a
    call; for tests and tools."""
    signed = webhook_id.encode() + b"." + str(timestamp).encode() + b"." + body
    mac = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: Optional[float] = None,
    tolerance: int = DEFAULT_TOLERANCE,
) -> None:
    """Raises :class:`InvalidSignatureError` unless ``body`` with ``headers``
    is a call signed with ``secret`` within ``tolerance`` seconds of ``now``
    (default: the clock). Header names are matched case-insensitively."""
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, timestamp, signatures = (
        h.get("webhook-id"),
        h.get("webhook-timestamp"),
        h.get("webhook-signature"),
    )
    if not msg_id or not timestamp or not signatures:
        raise InvalidSignatureError(
            "webhook-id, webhook-timestamp and webhook-signature are required", code="missing_signature"
        )
    if not _TIMESTAMP.fullmatch(timestamp):
        raise InvalidSignatureError("webhook-timestamp is not an integer", code="bad_timestamp")
    clock = time.time() if now is None else now
    if abs(clock - int(timestamp)) > tolerance:
        raise InvalidSignatureError(
            f"webhook-timestamp is more than {tolerance} s away from our clock (a replay, or a clock off)",
            code="signature_expired",
        )
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + bytes(body)
    expected = base64.b64encode(hmac.new(secret_key(secret), signed, hashlib.sha256).digest())
    for entry in signatures.split(" "):
        version, _, sig = entry.partition(",")
        if version == "v1" and sig.isascii() and hmac.compare_digest(sig.encode("ascii"), expected):
            return
    raise InvalidSignatureError("no v1 signature matches", code="bad_signature")


@dataclass(frozen=True)
class CheckRequest:
    """trustmsg's question: what did the local transaction of
    ``(biz_id, message_key)`` do? ``message_id`` is echoed in the answer."""

    biz_id: str
    message_key: str
    message_id: int
    attempt: int
    prepared_at: str

    @classmethod
    def parse(cls, body: bytes) -> CheckRequest:
        """Parses a verified body; unknown fields are ignored. Raises ValueError."""
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"not JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")

        def field(name: str, kind: type) -> Any:
            value = data.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"{name} missing or not a {kind.__name__}")
            return value

        message_id = field("message_id", int)
        if not 0 <= message_id < 2**64:
            raise ValueError("message_id is not an unsigned 64-bit integer")
        return cls(
            biz_id=field("biz_id", str),
            message_key=field("message_key", str),
            message_id=message_id,
            attempt=field("attempt", int),
            prepared_at=field("prepared_at", str),
        )


def answer_body(message_id: int, decision: str) -> bytes:
    """The answer's JSON: ``{"message_id": …, "decision": …}`` (every digit of the id kept)."""
    return json.dumps({"message_id": message_id, "decision": decision}).encode()


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"


def _error(status: int, code: str, message: str) -> Response:
    return Response(status, json.dumps({"error": {"code": code, "message": message}}).encode())


Decide = Callable[[CheckRequest], Union[str, Awaitable[str]]]


class CheckBackHandler:
    """Verifies a check-back call, asks ``decide`` and builds the answer;
    framework-free. ``decide(request)`` returns ``"commit"``, ``"rollback"``
    or ``"unknown"`` (:func:`trustmsg.barrier.decider` answers from the
    barrier). A bad signature is a 401 and ``decide`` is never called; a
    ``decide`` that raises is a 500 (trustmsg asks again later)."""

    def __init__(self, secret: str, decide: Decide, *, tolerance: int = DEFAULT_TOLERANCE) -> None:
        secret_key(secret)  # a secret that cannot verify would refuse every call: say so now
        if not callable(decide):
            raise TypeError("decide must be a callable taking a CheckRequest")
        self._secret = secret
        self.decide = decide
        self.tolerance = tolerance

    def __repr__(self) -> str:
        return f"CheckBackHandler(secret='***', decide={self.decide!r}, tolerance={self.tolerance})"

    def authenticate(self, headers: Mapping[str, str], body: bytes) -> Union[CheckRequest, Response]:
        """The parsed request of a call that verifies, else the error answer."""
        try:
            verify(self._secret, headers, body, tolerance=self.tolerance)
        except InvalidSignatureError as e:
            log.warning("check-back refused: %s", e.message)
            return _error(401, e.code or "bad_signature", e.message)
        try:
            return CheckRequest.parse(body)
        except ValueError as e:
            return _error(400, "bad_body", f"not a check-back request: {e}")

    def respond(self, request: CheckRequest, decision: object) -> Response:
        if decision not in DECISIONS:
            log.error("check-back decide() returned %r, not commit/rollback/unknown", decision)
            return _error(500, "decision_failed", "the producer could not decide; ask again later")
        log.info(
            "check-back of %r (message %d, attempt %d) answered %s",
            request.message_key,
            request.message_id,
            request.attempt,
            decision,
        )
        return Response(200, answer_body(request.message_id, str(decision)))

    def failed(self, request: CheckRequest, error: BaseException) -> Response:
        # The cause may be internal detail; trustmsg only needs to know to ask again.
        log.error("check-back decision of %r failed: %s", request.message_key, error, exc_info=error)
        return _error(500, "decision_failed", "the producer could not decide; ask again later")

    def handle(self, headers: Mapping[str, str], body: bytes) -> Response:
        """The whole call, synchronously (``decide`` must not be a coroutine function)."""
        request = self.authenticate(headers, body)
        if isinstance(request, Response):
            return request
        try:
            decision = self.decide(request)
            if isinstance(decision, Awaitable):
                raise TypeError("decide returned an awaitable: use trustmsg.asgi for async decide functions")
        except Exception as e:  # noqa: BLE001
            return self.failed(request, e)
        return self.respond(request, decision)

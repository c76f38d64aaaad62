"""What a producer sends (:class:`Message`) and what trustmsg answers
(:class:`MessageView`)."""

from __future__ import annotations

import base64
import datetime as dt
import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _trace
from . import _validate as v
from .errors import (
    AlreadyCommittedError,
    AlreadyRolledBackError,
    InvalidRequestError,
    NotPreparedError,
    TrustmsgError,
    UnexpectedResponseError,
)

__all__ = [
    "DECISIONS",
    "not_prepared_error",
    "Decision",
    "Message",
    "MessageStatus",
    "MessageView",
    "SendStatus",
]


if sys.version_info >= (3, 11):
    from enum import StrEnum as _StrEnum
else:  # pragma: no cover - 3.9 and 3.10

    class _StrEnum(str, enum.Enum):
        """``enum.StrEnum`` of Python 3.11: members are ``str``, and ``str()``
        / ``format()`` give the value, not ``Class.NAME``."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)


class StrEnum(_StrEnum):
    """The base of the SDK's enums: ``enum.StrEnum`` on Python 3.11+, the
    same behaviour (``str`` members, ``str()`` is the value) on 3.9/3.10."""


class _Open(StrEnum):
    """A StrEnum that also takes values it does not name (a newer trustmsg's
    status): they become members of their own, not errors."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value.upper()
        member._value_ = value
        return member


class Decision(StrEnum):
    """A check-back answer: ``"commit"``, ``"rollback"`` or ``"unknown"``. A
    ``str`` enum: ``Decision.COMMIT == "commit"``."""

    COMMIT = "commit"
    ROLLBACK = "rollback"
    UNKNOWN = "unknown"


#: The three decisions (``Decision.ALL`` before 0.2, kept).
DECISIONS: tuple[Decision, ...] = (Decision.COMMIT, Decision.ROLLBACK, Decision.UNKNOWN)
Decision.ALL = DECISIONS  # type: ignore[attr-defined]


class MessageStatus(_Open):
    """A message's decision state (``MessageView.status``). A ``str`` enum:
    ``view.status == "PREPARED"`` holds as before."""

    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    VERIFY_FAILED = "VERIFY_FAILED"


class SendStatus(_Open):
    """A committed message's delivery state (``MessageView.send_status``)."""

    PENDING = "PENDING"
    SENT = "SENT"
    SEND_FAILED = "SEND_FAILED"


@dataclass(frozen=True)
class Message:
    """A message to prepare (or submit, or enqueue in the local message table).

    ``payload`` is the Kafka record's value: ``bytes`` go as they are (sent
    base64-encoded), a ``str`` as its UTF-8 bytes. ``key`` is the record key
    (None: Kafka's partitioner picks), ``headers`` extra record headers
    (names starting with ``trustmsg-`` are reserved). At most one of
    ``deliver_after_ms`` (a delay after the prepare, by trustmsg's clock, at
    most 7 days) and ``deliver_at`` (a time, timezone-aware). ``traceparent``
    / ``tracestate`` give the W3C trace context explicitly; without them the
    current OpenTelemetry span's is taken when ``opentelemetry-api`` is
    installed.

    Everything trustmsg would refuse and the SDK can tell is refused here,
    with trustmsg's error code (:class:`~trustmsg.InvalidRequestError`).
    """

    message_key: str
    topic: str
    payload: Union[bytes, str]
    key: Optional[str] = None
    headers: Mapping[str, str] = field(default_factory=dict)
    deliver_after_ms: Optional[int] = None
    deliver_at: Optional[dt.datetime] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None

    def __post_init__(self) -> None:
        v.check_message_key(self.message_key)
        v.check_topic(self.topic)
        if not isinstance(self.payload, (bytes, bytearray, memoryview, str)):
            raise InvalidRequestError(
                f"payload must be bytes or str, not {type(self.payload).__name__}", code="invalid_request"
            )
        if isinstance(self.payload, (bytearray, memoryview)):
            object.__setattr__(self, "payload", bytes(self.payload))
        if isinstance(self.payload, str):
            v.check_text(self.payload, "payload")
        v.check_record_key(self.key)
        if not isinstance(self.headers, Mapping):
            raise InvalidRequestError("headers must be a mapping of str to str", code="invalid_headers")
        object.__setattr__(self, "headers", dict(self.headers))
        v.check_headers(self.headers)
        v.check_deliver_after_ms(self.deliver_after_ms)
        if self.deliver_at is not None:
            if self.deliver_after_ms is not None:
                raise InvalidRequestError(
                    "give deliver_at or deliver_after_ms, not both", code="invalid_delivery"
                )
            if not isinstance(self.deliver_at, dt.datetime) or self.deliver_at.tzinfo is None:
                raise InvalidRequestError(
                    "deliver_at must be a timezone-aware datetime (e.g. datetime.now(timezone.utc))",
                    code="invalid_deliver_at",
                )
            if self.deliver_at.timestamp() < 0:
                raise InvalidRequestError("deliver_at is before 1970", code="invalid_deliver_at")
        if self.traceparent is not None:
            v.check_text(self.traceparent, "traceparent")
        if self.tracestate is not None:
            v.check_text(self.tracestate, "tracestate")

    @property
    def payload_bytes(self) -> bytes:
        """The record value's bytes."""
        p = self.payload
        return p.encode("utf-8") if isinstance(p, str) else bytes(p)

    def deliver_at_text(self) -> Optional[str]:
        """``deliver_at`` as trustmsg takes it: RFC 3339 UTC with milliseconds."""
        if self.deliver_at is None:
            return None
        t = self.deliver_at.astimezone(dt.timezone.utc)
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

    def trace_headers(self) -> dict[str, str]:
        """The trace headers a prepare sends: the explicit ones, else the
        current OpenTelemetry span's, else none."""
        if self.traceparent is not None:
            h = {"traceparent": self.traceparent}
            if self.tracestate is not None:
                h["tracestate"] = self.tracestate
            return h
        return _trace.current_trace_headers()

    def to_request(self, biz_id: str) -> dict[str, Any]:
        """The body of ``POST /v1/messages/prepare`` for producer ``biz_id``."""
        body: dict[str, Any] = {
            "biz_id": v.check_biz_id(biz_id),
            "message_key": self.message_key,
            "topic": self.topic,
        }
        if isinstance(self.payload, str):
            body["payload"] = self.payload
        else:
            body["payload"] = base64.b64encode(self.payload).decode("ascii")
            body["payload_encoding"] = "base64"
        if self.key is not None:
            body["key"] = self.key
        if self.headers:
            body["headers"] = dict(self.headers)
        if self.deliver_after_ms is not None:
            body["deliver_after_ms"] = self.deliver_after_ms
        if self.deliver_at is not None:
            body["deliver_at"] = self.deliver_at_text()
        return body


@dataclass(frozen=True)
class MessageView:
    """A message as trustmsg shows it (``GET /v1/messages/{biz_id}/{key}``,
    and the answer to prepare, commit and rollback). ``raw`` holds every
    field of the answer, those not named here included."""

    id: int
    biz_id: str
    message_key: str
    status: MessageStatus
    send_status: Optional[SendStatus]
    topic: Optional[str]
    key: Optional[str]
    trace_id: Optional[str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: object) -> MessageView:
        if not isinstance(data, dict):
            raise UnexpectedResponseError("the answer is not a message view (not a JSON object)")
        try:
            id_ = data["id"]
            if isinstance(id_, bool) or not isinstance(id_, int):
                raise TypeError("id")
            return cls(
                id=id_,
                biz_id=str(data["biz_id"]),
                message_key=str(data["message_key"]),
                status=MessageStatus(str(data["status"])),
                send_status=None if data.get("send_status") is None else SendStatus(str(data["send_status"])),
                topic=data.get("topic"),
                key=data.get("key"),
                trace_id=data.get("trace_id"),
                raw=data,
            )
        except (KeyError, TypeError) as e:
            raise UnexpectedResponseError(
                f"the answer is not a message view: {e} missing or malformed"
            ) from None


def not_prepared_error(view: MessageView, what: str = "nothing was run") -> Optional[TrustmsgError]:
    """The error a prepare's answer stands for when it is not ``PREPARED``
    (the message was decided before), None when it is: ``COMMITTED`` is
    :class:`~trustmsg.AlreadyCommittedError`, ``ROLLED_BACK``
    :class:`~trustmsg.AlreadyRolledBackError`, anything else
    (``VERIFY_FAILED``) :class:`~trustmsg.NotPreparedError`; each carries
    ``view``. ``what`` ends the message (what the caller did not do)."""
    key = view.message_key
    if view.status == MessageStatus.PREPARED:
        return None
    if view.status == MessageStatus.COMMITTED:
        return AlreadyCommittedError(
            f"{key!r} was committed before (prepare answered COMMITTED): {what}", view=view
        )
    if view.status == MessageStatus.ROLLED_BACK:
        return AlreadyRolledBackError(
            f"{key!r} was rolled back before (prepare answered ROLLED_BACK): {what}", status=200, view=view
        )
    return NotPreparedError(f"prepare of {key!r} answered {view.status}: {what}", view=view)

"""Checks trustmsg makes of a message, made here first wherever the SDK can
tell: the same limits and the same error codes as the service's API. A
message that passes can still be refused by what only the service knows (its
payload limit, the producer's topic allow-list)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Optional

from .errors import InvalidRequestError

MAX_BIZ_ID = 64
MAX_MESSAGE_KEY = 128
MAX_TOPIC = 249
MAX_RECORD_KEY = 1024
MAX_HEADERS = 64
MAX_HEADER_NAME = 256
MAX_HEADER_BYTES = 16 * 1024
MAX_DELIVERY_DELAY_MS = 7 * 24 * 60 * 60 * 1000
MAX_GROUP = 255
RESERVED_PREFIX = "trustmsg-"

_BIZ_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def is_control(c: str) -> bool:
    """Unicode's control characters (general category Cc), as Rust's ``char::is_control``."""
    return unicodedata.category(c) == "Cc"


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequestError(f"{what} must be a str, not {type(value).__name__}", code="invalid_request")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(
            f"{what} is not valid Unicode (a lone surrogate)", code="invalid_request"
        ) from None
    return value


def check_biz_id(biz_id: object) -> str:
    v = check_text(biz_id, "biz_id")
    if not _BIZ_ID.fullmatch(v):
        raise InvalidRequestError(
            f"biz_id must be 1 to {MAX_BIZ_ID} of A-Z a-z 0-9 . _ - (got {v!r})", code="invalid_biz_id"
        )
    return v


def check_message_key(key: object) -> str:
    v = check_text(key, "message_key")
    n = _utf8_len(v)
    if n == 0 or n > MAX_MESSAGE_KEY:
        raise InvalidRequestError(
            f"message_key must be 1 to {MAX_MESSAGE_KEY} bytes of UTF-8 (got {n})", code="invalid_message_key"
        )
    if any(is_control(c) for c in v):
        raise InvalidRequestError(
            "message_key must not contain control characters", code="invalid_message_key"
        )
    return v


def check_topic(topic: object) -> str:
    v = check_text(topic, "topic")
    if not v or len(v) > MAX_TOPIC:
        raise InvalidRequestError(
            f"topic must be 1 to {MAX_TOPIC} characters long (got {len(v)})", code="invalid_topic"
        )
    if v in (".", ".."):
        raise InvalidRequestError(f"topic cannot be {v!r}", code="invalid_topic")
    if not _TOPIC.fullmatch(v):
        bad = next(c for c in v if not (c.isascii() and (c.isalnum() or c in "._-")))
        raise InvalidRequestError(
            f"topic may contain only ASCII letters, digits, '.', '_' and '-' (found {bad!r})",
            code="invalid_topic",
        )
    return v


def check_record_key(key: object) -> Optional[str]:
    if key is None:
        return None
    v = check_text(key, "key")
    n = _utf8_len(v)
    if n > MAX_RECORD_KEY:
        raise InvalidRequestError(f"key must be at most {MAX_RECORD_KEY} bytes (got {n})", code="invalid_key")
    return v


def check_headers(headers: Mapping[str, str]) -> None:
    if len(headers) > MAX_HEADERS:
        raise InvalidRequestError(
            f"at most {MAX_HEADERS} headers are allowed (got {len(headers)})", code="invalid_headers"
        )
    total = 0
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidRequestError("header names and values must be str", code="invalid_headers")
        n = _utf8_len(name)
        if n == 0 or n > MAX_HEADER_NAME:
            raise InvalidRequestError(
                f"header names must be 1 to {MAX_HEADER_NAME} bytes long", code="invalid_headers"
            )
        if any(is_control(c) for c in name):
            raise InvalidRequestError(
                f"header name {name!r} contains a control character", code="invalid_headers"
            )
        if any(is_control(c) for c in value):
            raise InvalidRequestError(
                f"the value of header {name!r} contains a control character; values must be printable text",
                code="invalid_headers",
            )
        if name.lower().startswith(RESERVED_PREFIX):
            raise InvalidRequestError(
                f"header {name!r} uses the reserved prefix {RESERVED_PREFIX!r}; trustmsg sets those itself",
                code="invalid_headers",
            )
        total += n + _utf8_len(value)
    if total > MAX_HEADER_BYTES:
        raise InvalidRequestError(
            f"headers total {total} bytes; at most {MAX_HEADER_BYTES} are allowed", code="invalid_headers"
        )


def check_deliver_after_ms(ms: object) -> Optional[int]:
    if ms is None:
        return None
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0 or ms > MAX_DELIVERY_DELAY_MS:
        raise InvalidRequestError(
            f"deliver_after_ms must be a whole number of milliseconds from 0 to {MAX_DELIVERY_DELAY_MS} "
            f"(7 days), got {ms!r}",
            code="invalid_deliver_after_ms",
        )
    return ms


def check_group(group: object) -> str:
    v = check_text(group, "consumer group")
    n = _utf8_len(v)
    if n == 0 or n > MAX_GROUP:
        raise InvalidRequestError(
            f"a consumer group is 1 to {MAX_GROUP} bytes (got {n})", code="invalid_group"
        )
    return v


def check_table(name: str) -> str:
    if not isinstance(name, str) or not _TABLE.fullmatch(name):
        raise InvalidRequestError(
            f"{name!r} is not a table name trustmsg accepts: "
            "1 to 64 of A-Z a-z 0-9 _, not starting with a digit",
            code="invalid_table",
        )
    return name

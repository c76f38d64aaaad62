#!/usr/bin/env python3
"""Writes the contract kit's vectors (../vectors/*.json), deterministically.

This is a second implementation of the signatures, written from the contract
(docs/check-back.md, docs/kafka-submit.md), with Python's standard library.
The Rust SDK's test `conformance` holds trustmsg's own code (the service's
signer and verifier) to every vector, so the two cannot drift apart: run this
after changing a case, and that test tells whether the service agrees.

    python3 client-sdk/conformance/tools/make-vectors.py
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

OUT = Path(__file__).resolve().parent.parent / "vectors"

# Standard Webhooks' own example secret, and a second one for rotation.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + base64.b64encode(b"trustmsg-conformance-other-key!!").decode()
NOW = 1_767_225_600  # 2026-01-01T00:00:00Z
TOLERANCE = 300

CHECK_BODY = (
    '{"biz_id":"order-service","message_key":"A-1001","message_id":4711,'
    '"attempt":1,"prepared_at":"2026-01-01T00:00:00.123Z"}'
)


def key_of(secret: str) -> bytes:
    return base64.b64decode(secret[len("whsec_") :] if secret.startswith("whsec_") else secret)


def webhook_signature(secret: str, msg_id: str, ts: str, body: bytes) -> str:
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key_of(secret), signed, hashlib.sha256).digest()).decode()


def check_case(
    name: str,
    valid: bool,
    why: str,
    *,
    secret: str = SECRET,
    sign_with: str = SECRET,
    msg_id: str = "chk_4711_1",
    ts: Optional[str] = None,
    body: str = CHECK_BODY,
    signed_body: Optional[str] = None,
    signature: Optional[str] = None,
    drop: Optional[str] = None,
) -> Dict[str, Any]:
    ts = str(NOW) if ts is None else ts
    sig = signature
    if sig is None:
        sig = webhook_signature(sign_with, msg_id, ts, (signed_body or body).encode())
    headers = {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": sig}
    if drop:
        del headers[drop]
    return {
        "name": name,
        "secret": secret,
        "headers": headers,
        "body": body,
        "now": NOW,
        "valid": valid,
        "why": why,
    }


def check_signatures() -> Dict[str, Any]:
    good = webhook_signature(SECRET, "chk_4711_1", str(NOW), CHECK_BODY.encode())
    other = webhook_signature(OTHER_SECRET, "chk_4711_1", str(NOW), CHECK_BODY.encode())
    utf8_body = CHECK_BODY.replace("A-1001", "Bestellung-\u00e9\u00df-\u4e2d")
    cases = [
        check_case("signed with the secret", True, "the v1 signature matches"),
        check_case(
            "body tampered after signing",
            False,
            "one byte of the body differs from what was signed",
            signed_body=CHECK_BODY,
            body=CHECK_BODY.replace("4711", "4712"),
        ),
        check_case("signed with another secret", False, "wrong secret", sign_with=OTHER_SECRET),
        check_case(
            "rotation: old and new signatures, the new one ours",
            True,
            "any v1 entry may match",
            signature=f"{other} {good}",
        ),
        check_case(
            "rotation: our secret among several, listed first",
            True,
            "any v1 entry may match",
            signature=f"{good} {other}",
        ),
        check_case(
            "several signatures, none ours",
            False,
            "no v1 entry matches",
            signature=f"{other} v1,{base64.b64encode(b'x' * 32).decode()}",
        ),
        check_case(
            "a matching signature under another version",
            False,
            "only v1 entries count",
            signature="v1a," + good[len("v1,") :],
        ),
        check_case("timestamp exactly 5 minutes old", True, "within the tolerance", ts=str(NOW - TOLERANCE)),
        check_case("timestamp 5 minutes and 1 s old", False, "too old: a replay", ts=str(NOW - TOLERANCE - 1)),
        check_case(
            "timestamp 5 minutes and 1 s in the future", False, "too far ahead", ts=str(NOW + TOLERANCE + 1)
        ),
        check_case("timestamp exactly 5 minutes ahead", True, "within the tolerance", ts=str(NOW + TOLERANCE)),
        check_case("timestamp not a number", False, "webhook-timestamp must be an integer", ts="yesterday"),
        check_case("no webhook-signature header", False, "all three headers are required", drop="webhook-signature"),
        check_case("no webhook-id header", False, "all three headers are required", drop="webhook-id"),
        check_case("no webhook-timestamp header", False, "all three headers are required", drop="webhook-timestamp"),
        check_case(
            "a body in UTF-8 beyond ASCII",
            True,
            "the MAC is over the raw bytes as received",
            body=utf8_body,
        ),
        check_case(
            "the same JSON re-serialized",
            False,
            "verify the raw bytes, never a re-serialization",
            signed_body=CHECK_BODY,
            body=json.dumps(json.loads(CHECK_BODY)),
        ),
        check_case("an empty signature header", False, "no v1 entry at all", signature=""),
    ]
    return {
        "about": "Check-back calls signed the Standard Webhooks way (docs/check-back.md). For each case: verify "
        "`body` (its UTF-8 bytes) with `headers` against `secret` as if the clock read `now` (unix seconds), "
        "with a tolerance of `tolerance_secs` either way; `valid` says whether it must be accepted.",
        "tolerance_secs": TOLERANCE,
        "cases": cases,
    }


def check_bodies() -> Dict[str, Any]:
    return {
        "about": "Check-back request bodies as trustmsg sends them, and the answers an SDK must give. A request "
        "parses to `request`; unknown fields are ignored. An answer is the JSON object `answer` (key order "
        "free), status 200.",
        "requests": [
            {
                "name": "a first check-back",
                "body": CHECK_BODY,
                "request": {
                    "biz_id": "order-service",
                    "message_key": "A-1001",
                    "message_id": 4711,
                    "attempt": 1,
                    "prepared_at": "2026-01-01T00:00:00.123Z",
                },
            },
            {
                "name": "a later attempt with a field added later (ignored)",
                "body": '{"biz_id":"shop","message_key":"order 42 ","message_id":9007199254740993,'
                '"attempt":7,"prepared_at":"2026-01-01T00:00:00Z","region":"eu"}',
                "request": {
                    "biz_id": "shop",
                    "message_key": "order 42 ",
                    "message_id": 9007199254740993,
                    "attempt": 7,
                    "prepared_at": "2026-01-01T00:00:00Z",
                },
            },
        ],
        "answers": [
            {"message_id": 4711, "decision": "commit", "answer": {"message_id": 4711, "decision": "commit"}},
            {"message_id": 4711, "decision": "rollback", "answer": {"message_id": 4711, "decision": "rollback"}},
            {"message_id": 4711, "decision": "unknown", "answer": {"message_id": 4711, "decision": "unknown"}},
            {
                "message_id": 9007199254740993,
                "decision": "commit",
                "answer": {"message_id": 9007199254740993, "decision": "commit"},
                "note": "ids are 64-bit: above 2^53 a JSON number must keep every digit",
            },
        ],
        "refusals": [
            {"name": "a forged or stale call", "status": 401, "note": "see check-signatures.json"},
        ],
    }


SUBMIT_CONTRACT = [
    "trustmsg-op",
    "trustmsg-biz-id",
    "trustmsg-message-key",
    "trustmsg-topic",
    "trustmsg-key",
    "trustmsg-signature",
]


def submit_input(op: str, biz: str, mkey: str, topic: str, key: Optional[str], headers: Dict[str, str], value: bytes) -> bytes:
    lines = [op, biz, mkey, topic, key or ""]
    for name in sorted(headers, key=lambda n: n.encode()):
        lines.append(f"{name}={headers[name]}")
    return ("\n".join(lines) + "\n").encode() + value


def submit_case(
    name: str, op: str, mkey: str, *, topic: str = "", key: Optional[str] = None, headers: Optional[Dict[str, str]] = None, value: bytes = b""
) -> Dict[str, Any]:
    headers = headers or {}
    biz = "shop"
    signing = submit_input(op, biz, mkey, topic, key, headers, value)
    signature = "v1," + base64.b64encode(hmac.new(key_of(SECRET), signing, hashlib.sha256).digest()).decode()
    record: List[Tuple[str, str]] = [("trustmsg-op", op), ("trustmsg-biz-id", biz), ("trustmsg-message-key", mkey)]
    if op == "prepare":
        record.append(("trustmsg-topic", topic))
        if key is not None:
            record.append(("trustmsg-key", key))
    record.extend(sorted(headers.items()))
    record.append(("trustmsg-signature", signature))
    return {
        "name": name,
        "op": op,
        "biz_id": biz,
        "message_key": mkey,
        "topic": topic,
        "key": key,
        "headers": headers,
        "value_base64": base64.b64encode(value).decode(),
        "signing_input_base64": base64.b64encode(signing).decode(),
        "signature": signature,
        "record": {
            "key": mkey,
            "value_base64": base64.b64encode(value).decode(),
            "headers": [[n, v] for n, v in record],
        },
    }


def submit_records() -> Dict[str, Any]:
    return {
        "about": "The Kafka way in (docs/kafka-submit.md): records that submit prepare, commit and rollback, signed "
        "with `secret`. `signing_input_base64` is the exact bytes the HMAC covers; `signature` the "
        "trustmsg-signature header; `record` the record to produce (its headers in any order). "
        "`ambiguous` cases must be refused before signing.",
        "secret": SECRET,
        "contract_headers": SUBMIT_CONTRACT,
        "cases": [
            submit_case(
                "a prepare with a key and headers (signed in byte order of their names)",
                "prepare",
                "order-42",
                topic="orders",
                key="customer-7",
                headers={"x-trace": "abc", "content-type": "application/json", "Zeta": "upper first"},
                value=b'{"total":42}',
            ),
            submit_case("a prepare without a key", "prepare", "order-43", topic="orders", value=b"\x00\x01binary\xff"),
            submit_case(
                "a prepare delivered later",
                "prepare",
                "order-44",
                topic="orders",
                headers={"trustmsg-deliver-after-ms": "60000"},
                value=b"later",
            ),
            submit_case("a prepare with an empty payload", "prepare", "order-45", topic="orders"),
            submit_case("a commit", "commit", "order-42"),
            submit_case("a rollback", "rollback", "order-43"),
            submit_case("a key in UTF-8 beyond ASCII", "commit", "Bestellung-\u00e9\u00df"),
        ],
        "ambiguous": [
            {"name": "a line break in the message key", "op": "commit", "biz_id": "shop", "message_key": "a\nb", "topic": "", "key": None, "headers": {}},
            {"name": "a carriage return in the record key", "op": "prepare", "biz_id": "shop", "message_key": "k", "topic": "orders", "key": "a\rb", "headers": {}},
            {"name": "an = in a header name", "op": "prepare", "biz_id": "shop", "message_key": "k", "topic": "orders", "key": None, "headers": {"a=b": "c"}},
            {"name": "a line break in a header value", "op": "prepare", "biz_id": "shop", "message_key": "k", "topic": "orders", "key": None, "headers": {"h": "1\n2"}},
        ],
    }


def record_headers() -> Dict[str, Any]:
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    return {
        "about": "Headers of records trustmsg delivers, as a consumer reads them (values as UTF-8 text; null: a "
        "header without a value). `message_id` is what the inbox keys on: null means the record is not "
        "trustmsg's (no usable trustmsg-message-id) and the inbox must refuse it, not process it unkeyed.",
        "cases": [
            {
                "name": "a delivered message",
                "headers": [
                    ["trustmsg-message-id", "4711"],
                    ["trustmsg-biz-id", "order-service"],
                    ["trustmsg-message-key", "A-1001"],
                    ["content-type", "application/json"],
                ],
                "message_id": 4711,
                "biz_id": "order-service",
                "message_key": "A-1001",
            },
            {
                "name": "with trace context",
                "headers": [
                    ["trustmsg-message-id", "18446744073709551615"],
                    ["trustmsg-biz-id", "shop"],
                    ["trustmsg-message-key", "k"],
                    ["traceparent", tp],
                    ["tracestate", "vendor=1"],
                ],
                "message_id": 18446744073709551615,
                "biz_id": "shop",
                "message_key": "k",
                "traceparent": tp,
                "tracestate": "vendor=1",
                "note": "the id is an unsigned 64-bit integer",
            },
            {"name": "no message id", "headers": [["content-type", "text/plain"]], "message_id": None},
            {"name": "a message id that is not a number", "headers": [["trustmsg-message-id", "abc"]], "message_id": None},
            {"name": "a negative message id", "headers": [["trustmsg-message-id", "-5"]], "message_id": None},
            {"name": "a message id header without a value", "headers": [["trustmsg-message-id", None]], "message_id": None},
            {
                "name": "a message id beyond 64 bits",
                "headers": [["trustmsg-message-id", "18446744073709551616"]],
                "message_id": None,
            },
        ],
    }


def outbox_rows() -> Dict[str, Any]:
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    def msg(**kw: Any) -> Dict[str, Any]:
        base = {"message_key": "order-42", "topic": "orders", "payload_base64": base64.b64encode(b'{"order":42}').decode()}
        base.update(kw)
        return base

    return {
        "about": "The local message table's row (docs/outbox.md) that `enqueue` writes for a message: `row` holds "
        "the columns it sets (`headers` a JSON object compared as an object, null: SQL NULL; `deliver` how "
        "deliver_at is set); every other column keeps its default. A message with `error` must be refused "
        "before anything is written, with that code (the HTTP API's).",
        "valid": [
            {
                "name": "the three columns a producer must write",
                "message": msg(),
                "row": {"message_key": "order-42", "topic": "orders", "record_key": None, "payload_base64": msg()["payload_base64"], "headers": None, "traceparent": None, "deliver": None},
            },
            {
                "name": "a record key, headers and a trace",
                "message": msg(key="customer-7", headers={"content-type": "application/json", "source": "orders"}, traceparent=tp),
                "row": {"message_key": "order-42", "topic": "orders", "record_key": "customer-7", "payload_base64": msg()["payload_base64"], "headers": {"content-type": "application/json", "source": "orders"}, "traceparent": tp, "deliver": None},
            },
            {
                "name": "an invalid traceparent is left out, not refused",
                "message": msg(traceparent="00-nothex-00f067aa0ba902b7-01"),
                "row": {"message_key": "order-42", "topic": "orders", "record_key": None, "payload_base64": msg()["payload_base64"], "headers": None, "traceparent": None, "deliver": None},
            },
            {
                "name": "a delay: deliver_at is the database's now plus the delay",
                "message": msg(deliver_after_ms=60000),
                "row": {"message_key": "order-42", "topic": "orders", "record_key": None, "payload_base64": msg()["payload_base64"], "headers": None, "traceparent": None, "deliver": {"after_ms": 60000}},
            },
            {
                "name": "binary payload bytes kept as they are",
                "message": msg(payload_base64=base64.b64encode(bytes(range(256))).decode()),
                "row": {"message_key": "order-42", "topic": "orders", "record_key": None, "payload_base64": base64.b64encode(bytes(range(256))).decode(), "headers": None, "traceparent": None, "deliver": None},
            },
        ],
        "invalid": [
            {"name": "an empty message key", "message": msg(message_key=""), "error": "invalid_message_key"},
            {"name": "a message key of 129 bytes", "message": msg(message_key="k" * 129), "error": "invalid_message_key"},
            {"name": "a control character in the message key", "message": msg(message_key="a\tb"), "error": "invalid_message_key"},
            {"name": "a topic with a space", "message": msg(topic="my orders"), "error": "invalid_topic"},
            {"name": "the topic ..", "message": msg(topic=".."), "error": "invalid_topic"},
            {"name": "a topic of 250 characters", "message": msg(topic="t" * 250), "error": "invalid_topic"},
            {"name": "a record key of 1025 bytes", "message": msg(key="k" * 1025), "error": "invalid_key"},
            {"name": "a header in trustmsg's namespace", "message": msg(headers={"Trustmsg-Message-Id": "1"}), "error": "invalid_headers"},
            {"name": "a control character in a header value", "message": msg(headers={"h": "a\nb"}), "error": "invalid_headers"},
            {"name": "a delay over 7 days", "message": msg(deliver_after_ms=7 * 24 * 3600 * 1000 + 1), "error": "invalid_deliver_after_ms"},
        ],
    }


def barrier_keys() -> Dict[str, Any]:
    return {
        "about": "Message keys the barrier must keep apart: each pair is two messages, and the marker of one must "
        "never answer for the other (byte-for-byte comparison, on MySQL/MariaDB and on PostgreSQL).",
        "pairs": [
            {"name": "a trailing space", "a": "A-1001", "b": "A-1001 "},
            {"name": "case", "a": "order-a", "b": "ORDER-A"},
            {"name": "composed and decomposed \u00e9", "a": "caf\u00e9", "b": "cafe\u0301"},
            {"name": "a leading space", "a": "k", "b": " k"},
        ],
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    files = {
        "check-signatures.json": check_signatures(),
        "check-bodies.json": check_bodies(),
        "submit-records.json": submit_records(),
        "record-headers.json": record_headers(),
        "outbox-rows.json": outbox_rows(),
        "barrier-keys.json": barrier_keys(),
    }
    for name, content in files.items():
        (OUT / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote vectors/{name}")


if __name__ == "__main__":
    main()

"""Every case of the contract kit's vector files that concerns this SDK,
loaded and asserted (no service needed)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

import trustmsg
from trustmsg import InvalidRequestError, InvalidSignatureError, Message, checkback, inbox, outbox, submit
from trustmsg.asgi import CheckBackASGI

from .conftest import vector

SIGNATURES = vector("check-signatures.json")
BODIES = vector("check-bodies.json")
SUBMIT = vector("submit-records.json")
HEADERS = vector("record-headers.json")
OUTBOX = vector("outbox-rows.json")


@pytest.mark.parametrize("case", SIGNATURES["cases"], ids=lambda c: c["name"])
def test_check_signatures(case: dict[str, Any]) -> None:
    body = case["body"].encode("utf-8")
    tolerance = SIGNATURES["tolerance_secs"]
    if case["valid"]:
        checkback.verify(case["secret"], case["headers"], body, now=case["now"], tolerance=tolerance)
    else:
        with pytest.raises(InvalidSignatureError) as e:
            checkback.verify(case["secret"], case["headers"], body, now=case["now"], tolerance=tolerance)
        assert e.value.status == 401


def test_check_signature_headers_are_case_insensitive_and_sign_agrees() -> None:
    case = SIGNATURES["cases"][0]
    upper = {k.upper(): v for k, v in case["headers"].items()}
    checkback.verify(case["secret"], upper, case["body"].encode(), now=case["now"])
    h = case["headers"]
    assert (
        checkback.sign(case["secret"], h["webhook-id"], int(h["webhook-timestamp"]), case["body"].encode())
        == (h["webhook-signature"])
    )


def test_a_secret_that_is_not_base64_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        checkback.CheckBackHandler("whsec_not base64!", lambda r: "commit")


@pytest.mark.parametrize("case", BODIES["requests"], ids=lambda c: c["name"])
def test_check_bodies_parse(case: dict[str, Any]) -> None:
    parsed = checkback.CheckRequest.parse(case["body"].encode())
    assert parsed == checkback.CheckRequest(**case["request"])


@pytest.mark.parametrize("case", BODIES["answers"], ids=lambda c: f"{c['message_id']}-{c['decision']}")
def test_check_answers(case: dict[str, Any]) -> None:
    body = checkback.answer_body(case["message_id"], case["decision"])
    assert json.loads(body) == case["answer"]
    assert str(case["message_id"]).encode() in body  # every digit kept, also above 2^53


@pytest.mark.parametrize("case", BODIES["requests"], ids=lambda c: c["name"])
def test_the_handler_answers_every_request_body(case: dict[str, Any]) -> None:
    secret = SIGNATURES["cases"][0]["secret"]
    handler = checkback.CheckBackHandler(secret, lambda r: "commit")
    body = case["body"].encode()
    import time

    ts = int(time.time())
    headers = {
        "webhook-id": "chk_1_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": checkback.sign(secret, "chk_1_1", ts, body),
    }
    answer = handler.handle(headers, body)
    assert answer.status == 200
    assert json.loads(answer.body) == {"message_id": case["request"]["message_id"], "decision": "commit"}
    refusal = BODIES["refusals"][0]
    assert handler.handle({**headers, "webhook-signature": "v1,AAAA"}, body).status == refusal["status"]


def test_asgi_app_is_usable_without_a_framework() -> None:
    assert callable(CheckBackASGI(SIGNATURES["cases"][0]["secret"], lambda r: "commit"))


def _signed(case: dict[str, Any]) -> bytes:
    return submit.signing_input(
        case["op"],
        case["biz_id"],
        case["message_key"],
        case["topic"],
        case["key"],
        case["headers"],
        base64.b64decode(case.get("value_base64", "")),
    )


@pytest.mark.parametrize("case", SUBMIT["cases"], ids=lambda c: c["name"])
def test_submit_records_sign_to_the_same_bytes(case: dict[str, Any]) -> None:
    data = _signed(case)
    assert data == base64.b64decode(case["signing_input_base64"])
    assert submit.sign_record(SUBMIT["secret"], data) == case["signature"]
    record = submit.submit_record(
        SUBMIT["secret"],
        case["op"],
        case["biz_id"],
        case["message_key"],
        case["topic"],
        case["key"],
        case["headers"],
        base64.b64decode(case["value_base64"]),
    )
    assert record.key == case["record"]["key"].encode()
    assert record.value == base64.b64decode(case["record"]["value_base64"])
    assert [(n, v) for n, v in record.headers] == [(n, v.encode()) for n, v in case["record"]["headers"]]
    assert {n for n, _ in record.headers} >= {
        h for h in SUBMIT["contract_headers"] if h not in ("trustmsg-topic", "trustmsg-key")
    }


@pytest.mark.parametrize("case", SUBMIT["ambiguous"], ids=lambda c: c["name"])
def test_ambiguous_submit_records_are_refused_before_signing(case: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError) as e:
        _signed(case)
    assert e.value.code == "invalid_request"


@pytest.mark.parametrize("case", HEADERS["cases"], ids=lambda c: c["name"])
def test_record_headers_message_id(case: dict[str, Any]) -> None:
    headers = [(n, None if v is None else v.encode()) for n, v in case["headers"]]
    assert inbox.message_id(headers) == case["message_id"]

    class Rec:
        def headers(self) -> list[tuple[str, Any]]:
            return headers

    if case["message_id"] is None:
        with pytest.raises(trustmsg.NoMessageIdError):
            inbox.process(object(), "g", Rec(), lambda c: None)


def _message(m: dict[str, Any]) -> Message:
    return Message(
        message_key=m["message_key"],
        topic=m["topic"],
        payload=base64.b64decode(m["payload_base64"]),
        key=m.get("key"),
        headers=m.get("headers") or {},
        deliver_after_ms=m.get("deliver_after_ms"),
        traceparent=m.get("traceparent"),
    )


@pytest.mark.parametrize("case", OUTBOX["valid"], ids=lambda c: c["name"])
def test_outbox_rows_values(case: dict[str, Any]) -> None:
    values = outbox.row_values(_message(case["message"]), "mysql")
    row = case["row"]
    key, topic, record_key, payload, headers, traceparent, at, delay_us = values
    assert (key, topic, record_key, traceparent) == (
        row["message_key"],
        row["topic"],
        row["record_key"],
        row["traceparent"],
    )
    assert payload == base64.b64decode(row["payload_base64"])
    assert (None if headers is None else json.loads(str(headers))) == row["headers"]
    assert at is None
    assert delay_us == (None if row["deliver"] is None else row["deliver"]["after_ms"] * 1000)


@pytest.mark.parametrize("case", OUTBOX["invalid"], ids=lambda c: c["name"])
def test_outbox_invalid_messages_are_refused_with_the_apis_code(case: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError) as e:
        _message(case["message"])
    assert e.value.code == case["error"]


@pytest.mark.parametrize(
    ("shipped", "source"),
    [
        ("mysql.sql", "client-sdk/conformance/sql/mysql.sql"),
        ("postgres.sql", "client-sdk/conformance/sql/postgres.sql"),
        ("outbox-mysql.sql", "migrations/outbox/mysql.sql"),
        ("outbox-postgres.sql", "migrations/outbox/postgres.sql"),
    ],
)
def test_the_shipped_sql_is_the_repositorys(shipped: str, source: str) -> None:
    """The package ships copies (a wheel cannot reach outside itself): they must not drift."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    assert trustmsg.schema.sql(shipped) == (root / source).read_text(encoding="utf-8")


def test_retry_delays_double_with_bounded_jitter_and_honour_retry_after() -> None:
    policy = trustmsg.RetryPolicy()
    for retry, base in enumerate([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]):
        for _ in range(50):
            assert base * 0.8 <= policy.delay(retry) <= base * 1.2
    assert policy.delay(0, retry_after=2.0) >= 2.0
    assert policy.delay(0, retry_after=3600.0) <= 60.0
    assert trustmsg.RetryPolicy.none().max_retries == 0
    with pytest.raises(ValueError, match="min_delay"):
        trustmsg.RetryPolicy(min_delay=0)


def test_inputs_are_refused_with_errors_a_person_can_act_on() -> None:
    with pytest.raises(ValueError, match="http"):
        trustmsg.Client("127.0.0.1:8080", "shop", "t")
    with pytest.raises(InvalidRequestError) as e:
        trustmsg.Client("http://127.0.0.1:8080", "my shop", "t")
    assert e.value.code == "invalid_biz_id"
    with pytest.raises(ValueError, match="token"):
        trustmsg.Client("http://127.0.0.1:8080", "shop", "")
    with pytest.raises(InvalidRequestError) as e:
        Message("k", "t", b"", deliver_after_ms=1, deliver_at=__import__("datetime").datetime.now())
    assert e.value.code == "invalid_delivery"
    with pytest.raises(InvalidRequestError) as e:
        outbox.enqueue(object(), Message("k", "t", b""), table="t; DROP TABLE x")
    assert e.value.code == "invalid_table"
    with pytest.raises(TypeError, match="PyMySQL"):
        trustmsg.LocalTransaction(object(), "shop", "k")
    with trustmsg.Client("http://127.0.0.1:1", "shop", "secret-token") as client:
        assert "secret-token" not in repr(client)

"""The barrier and the check-back endpoints on real MariaDB and PostgreSQL,
served by real HTTP servers: S04, S05, S06."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Callable

import flask
import httpx
import psycopg
import pytest

import trustmsg
from trustmsg import AlreadyDecidedError, Decision, LocalTransaction, barrier
from trustmsg.asgi import CheckBackASGI
from trustmsg.checkback import sign
from trustmsg.wsgi import CheckBackWSGI, flask_blueprint

from .conftest import DB, pg_dsn, post, signed_post, suffix, vector

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM="


def body_of(biz_id: str, key: str, message_id: int = 4711) -> bytes:
    return json.dumps(
        {
            "biz_id": biz_id,
            "message_key": key,
            "message_id": message_id,
            "attempt": 1,
            "prepared_at": "2026-01-01T00:00:00.123Z",
        }
    ).encode()


def markers(db: DB, biz_id: str) -> list[tuple[str, str]]:
    rows = db.query(
        "SELECT message_key, op FROM trustmsg_barrier WHERE biz_id = %s ORDER BY message_key", (biz_id,)
    )
    return [
        (k.decode() if isinstance(k, bytes) else k, o.decode() if isinstance(o, bytes) else o)
        for k, o in rows
    ]


def serve(
    kind: str, decide: Callable[[Any], str], serve_asgi: Any, serve_wsgi: Any, secret: str = SECRET
) -> str:
    """The check-back endpoint URL, on a real server of the given kind."""
    if kind == "asgi":
        import fastapi

        app = fastapi.FastAPI()
        app.routes.append(CheckBackASGI(secret, decide).route())
        return str(serve_asgi(app)) + "/trustmsg/check"
    if kind == "flask":
        fapp = flask.Flask(__name__)
        fapp.register_blueprint(flask_blueprint(secret, decide))
        return str(serve_wsgi(fapp)) + "/trustmsg/check"
    return str(serve_wsgi(CheckBackWSGI(secret, decide))) + "/trustmsg/check"


def test_S05_barrier_keys_differing_by_a_space_or_case_are_other_messages(db: DB) -> None:
    biz_id = f"py-s05-{suffix()}"
    for pair in vector("barrier-keys.json")["pairs"]:
        conn = db.connect()
        try:
            with LocalTransaction(conn, biz_id, pair["a"]):
                pass
            assert barrier.check(db.connect, biz_id, pair["b"]) == Decision.ROLLBACK, pair["name"]
            assert barrier.check(db.connect, biz_id, pair["a"]) == Decision.COMMIT, pair["name"]
            # The local transaction of b now finds b's rollback marker, not a's commit.
            with pytest.raises(AlreadyDecidedError) as e, LocalTransaction(conn, biz_id, pair["b"]):
                pass
            assert e.value.decision == Decision.ROLLBACK
        finally:
            conn.close()
    got = dict(markers(db, biz_id))
    for pair in vector("barrier-keys.json")["pairs"]:
        assert got[pair["a"]] == "commit"
        assert got[pair["b"]] == "rollback"


@pytest.mark.parametrize("case", ["a_commit", "b_rollback"])
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_S04_check_back_during_the_local_transaction_waits_for_it(
    db: DB, case: str, kind: str, serve_asgi: Any, serve_wsgi: Any
) -> None:
    biz_id, key = f"py-s04-{suffix()}", f"order-{suffix()}"
    url = serve(kind, barrier.decider(db.connect), serve_asgi, serve_wsgi)
    table = db.business_table()
    conn = db.connect()
    answers: list[tuple[float, int, Any]] = []

    def ask() -> None:
        status, answer = signed_post(url, SECRET, body_of(biz_id, key))
        answers.append((time.monotonic(), status, answer))

    try:
        tx = LocalTransaction(conn, biz_id, key)
        tx.__enter__()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", (key, "paid"))
        asker = threading.Thread(target=ask)
        asker.start()
        time.sleep(1.5)
        assert answers == [], "the check-back answered while the local transaction was open"
        ended = time.monotonic()
        if case == "a_commit":
            tx.__exit__(None, None, None)
        else:
            tx.__exit__(RuntimeError, RuntimeError("no"), None)
        asker.join(30)
        assert len(answers) == 1
        at, status, answer = answers[0]
        assert at >= ended
        assert status == 200
        want = Decision.COMMIT if case == "a_commit" else Decision.ROLLBACK
        assert answer == {"message_id": 4711, "decision": want}
        if case == "b_rollback":
            with pytest.raises(AlreadyDecidedError) as e, LocalTransaction(conn, biz_id, key):
                pass
            assert e.value.decision == Decision.ROLLBACK
            assert db.query(f"SELECT id FROM {table}") == []
        else:
            assert db.query(f"SELECT id FROM {table}") == [(key,)]
    finally:
        conn.close()


@pytest.mark.asyncio
async def test_S04_async_check_back_waits_for_an_async_transaction(postgres_db: DB, serve_asgi: Any) -> None:
    """The asyncio path: psycopg's AsyncConnection and an async decide function."""
    db = postgres_db
    biz_id, key = f"py-s04a-{suffix()}", f"order-{suffix()}"

    async def decide(request: trustmsg.CheckRequest) -> str:
        async with await psycopg.AsyncConnection.connect(pg_dsn(db.url)) as c:
            return await barrier.acheck(c, request.biz_id, request.message_key)

    url = serve_asgi(CheckBackASGI(SECRET, decide, path="/trustmsg/check")) + "/trustmsg/check"
    conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
    ts = int(time.time())
    body = body_of(biz_id, key, 9007199254740993)
    headers = {
        "webhook-id": "chk_1_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": sign(SECRET, "chk_1_1", ts, body),
    }
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            async with trustmsg.AsyncLocalTransaction(conn, biz_id, key):
                asking = asyncio.ensure_future(http.post(url, content=body, headers=headers))
                await asyncio.sleep(1.0)
                assert not asking.done(), "answered while the local transaction was open"
            # leaving the block committed
            answer = await asking
        assert answer.status_code == 200
        assert answer.json() == {"message_id": 9007199254740993, "decision": "commit"}
        assert b"9007199254740993" in answer.content
    finally:
        await conn.close()


@pytest.mark.parametrize("kind", ["asgi", "flask", "wsgi"])
def test_S06_forged_or_stale_check_back_is_refused(
    mysql_db: DB, kind: str, serve_asgi: Any, serve_wsgi: Any
) -> None:
    db = mysql_db
    biz_id, key = f"py-s06-{suffix()}", f"order-{suffix()}"
    calls: list[trustmsg.CheckRequest] = []
    decide_barrier = barrier.decider(db.connect)

    def decide(request: trustmsg.CheckRequest) -> str:
        calls.append(request)
        return decide_barrier(request)

    url = serve(kind, decide, serve_asgi, serve_wsgi)
    body = body_of(biz_id, key)
    now = int(time.time())

    assert signed_post(url, OTHER_SECRET, body)[0] == 401, "signed with another secret"
    ts = now
    tampered_headers = {
        "webhook-id": "chk_9_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": sign(SECRET, "chk_9_1", ts, body),
    }
    status, answer = post(url, body.replace(b"4711", b"4712"), tampered_headers)
    assert status == 401, "a tampered body"
    assert answer["error"]["code"] == "bad_signature"
    status, answer = signed_post(url, SECRET, body, timestamp=now - 600)
    assert status == 401, "10 minutes old"
    assert answer["error"]["code"] == "signature_expired"
    status, answer = post(url, body, {"content-type": "application/json"})
    assert status == 401, "no signature headers"
    assert answer["error"]["code"] == "missing_signature"

    assert calls == [], "decide was called for a refused call"
    assert markers(db, biz_id) == [], "a forged call wrote a marker"

    status, answer = signed_post(url, SECRET, body)
    assert (status, answer) == (200, {"message_id": 4711, "decision": "rollback"})
    assert markers(db, biz_id) == [(key, "rollback")]


def test_a_decide_that_fails_is_a_500_and_asked_again(serve_asgi: Any) -> None:
    def decide(request: trustmsg.CheckRequest) -> str:
        raise RuntimeError("database down")

    url = serve_asgi(CheckBackASGI(SECRET, decide)) + "/trustmsg/check"
    status, answer = signed_post(url, SECRET, body_of("shop", "k"))
    assert status == 500
    assert answer["error"]["code"] == "decision_failed"
    assert "database down" not in json.dumps(answer)


def test_the_wsgi_app_passes_other_paths_to_the_fallback(serve_wsgi: Any) -> None:
    def django_like(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"the rest of the site"]

    base = serve_wsgi(CheckBackWSGI(SECRET, lambda r: "commit", fallback=django_like))
    assert httpx.get(base + "/orders").text == "the rest of the site"
    assert signed_post(base + "/trustmsg/check", SECRET, body_of("shop", "k"))[1]["decision"] == "commit"


@pytest.mark.parametrize("ends", ["commit", "raise"])
def test_a_transaction_the_connection_has_open_is_joined(db: DB, ends: str) -> None:
    """Work done before the helper, in the transaction the connection had
    open (PyMySQL and psycopg without autocommit), commits or rolls back with
    the marker: a PyMySQL BEGIN would have committed it on its own."""
    biz_id, key = f"py-join-{suffix()}", f"order-{suffix()}"
    table = db.business_table()
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", ("before", "x"))
        if ends == "commit":
            with LocalTransaction(conn, biz_id, key):
                pass
            assert db.query(f"SELECT id FROM {table}") == [("before",)]
            assert markers(db, biz_id) == [(key, "commit")]
        else:
            with pytest.raises(KeyError), LocalTransaction(conn, biz_id, key):
                raise KeyError("no")
            assert db.query(f"SELECT id FROM {table}") == []
            assert markers(db, biz_id) == []
    finally:
        conn.close()


def test_a_psycopg_transaction_block_is_refused(postgres_db: DB) -> None:
    conn = postgres_db.connect()
    try:
        with conn.transaction(), pytest.raises(ValueError, match="transaction"):
            LocalTransaction(conn, "shop", "k").__enter__()
    finally:
        conn.close()

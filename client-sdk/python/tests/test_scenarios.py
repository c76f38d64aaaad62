"""The contract kit's scenarios S01-S03 and S07-S10 against the real
trustmsg binary, real MariaDB and PostgreSQL, and the kit's Kafka broker
(S04-S06 are in test_barrier.py)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any, Optional

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

import trustmsg
from trustmsg import (
    ConflictError,
    Decision,
    LocalTransaction,
    Message,
    MessageStatus,
    Outcome,
    RetryPolicy,
    SendStatus,
    barrier,
    inbox,
    outbox,
)
from trustmsg.asgi import CheckBackASGI
from trustmsg.submit import Submitter
from trustmsg.wsgi import flask_blueprint

from .conftest import DB, Kit, Record, consume, pg_dsn, read_topic, records, sa_url, suffix

PAYLOAD = bytes(range(256)) + b'{"order":42}'
HEADERS = {"content-type": "application/json", "x-trace": "abc", "Zeta": "upper first"}


def assert_delivered(
    rec: Record, key: str, record_key: Optional[str], payload: bytes, headers: dict[str, str], message_id: int
) -> None:
    assert rec.key == (None if record_key is None else record_key.encode())
    assert rec.header("trustmsg-message-key") == key
    assert rec.value == payload
    for name, value in headers.items():
        assert rec.header(name) == value, name
    assert rec.header("trustmsg-message-id") == str(message_id)


def business_rows(db: DB, table: str) -> list[tuple[Any, ...]]:
    return db.query(f"SELECT id, note FROM {table} ORDER BY id")


def marker(db: DB, biz_id: str, key: str) -> list[Any]:
    rows = db.query("SELECT op FROM trustmsg_barrier WHERE biz_id = %s AND message_key = %s", (biz_id, key))
    return [r[0].decode() if isinstance(r[0], bytes) else r[0] for r in rows]


def insert(conn: Any, table: str, key: str, note: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", (key, note))


# --- S01 -----------------------------------------------------------------


def test_S01_committed_message_reaches_kafka_byte_for_byte(kit: Kit, db: DB) -> None:
    p = kit.register("s01")
    table = db.business_table()
    key = f"order-{suffix()}"
    conn = db.connect()
    try:
        with kit.client(p) as client:
            message = Message(key, p.topic, PAYLOAD, key="customer-7", headers=HEADERS)
            with client.transaction(message, conn) as tx:
                assert tx.message is not None and tx.message.status == "PREPARED"  # a str enum
                insert(conn, table, key, "paid")
            assert tx.outcome == Outcome.COMMITTED
            assert tx.message.status == MessageStatus.COMMITTED
            prepared_id = tx.message.id
            view = kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT)
            assert view.id == prepared_id
    finally:
        conn.close()
    assert business_rows(db, table) == [(key, "paid")]
    assert marker(db, p.biz_id, key) == ["commit"]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    time.sleep(0.5)
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    rec = recs[0]
    assert rec.key == b"customer-7"
    assert rec.value == PAYLOAD
    for name, value in HEADERS.items():
        assert rec.header(name) == value
    assert rec.header("trustmsg-message-id") == str(prepared_id)


@pytest.mark.asyncio
async def test_S01_async_committed_message_reaches_kafka(kit: Kit, db: DB) -> None:
    """AsyncClient; psycopg's AsyncConnection on PostgreSQL, PyMySQL (in a worker thread) on MariaDB."""
    p = kit.register("s01a")
    table = db.business_table()
    key = f"order-{suffix()}"
    if db.dialect == "postgres":
        conn: Any = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
    else:
        conn = db.connect()
    try:
        async with kit.async_client(p) as client:
            async with client.transaction(Message(key, p.topic, PAYLOAD, headers=HEADERS), conn) as tx:
                if db.dialect == "postgres":
                    await conn.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", (key, "paid"))
                else:
                    await asyncio.to_thread(insert, conn, table, key, "paid")
            assert tx.outcome == Outcome.COMMITTED
            assert tx.message is not None
            message_id = tx.message.id
    finally:
        if db.dialect == "postgres":
            await conn.close()
        else:
            conn.close()
    assert business_rows(db, table) == [(key, "paid")]
    recs = await asyncio.to_thread(read_topic, kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert_delivered(recs[0], key, None, PAYLOAD, HEADERS, message_id)


def test_S01_sqlalchemy_session(kit: Kit, db: DB) -> None:
    p = kit.register("s01s")
    table = db.business_table()
    key = f"order-{suffix()}"
    engine = sa.create_engine(db.sqlalchemy_url())
    try:
        with kit.client(p) as client, Session(engine) as session:
            with client.transaction(Message(key, p.topic, PAYLOAD), session) as tx:
                session.execute(
                    sa.text(f"INSERT INTO {table} (id, note) VALUES (:id, :note)"), {"id": key, "note": "sa"}
                )
            assert tx.outcome == Outcome.COMMITTED
            assert tx.message is not None
            message_id = tx.message.id
    finally:
        engine.dispose()
    assert business_rows(db, table) == [(key, "sa")]
    assert marker(db, p.biz_id, key) == ["commit"]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert_delivered(recs[0], key, None, PAYLOAD, {}, message_id)


# --- S02 -----------------------------------------------------------------


class CardDeclined(Exception):
    pass


def test_S02_failed_local_transaction_is_rolled_back_and_never_delivered(kit: Kit, db: DB) -> None:
    p = kit.register("s02")
    table = db.business_table()
    failed, later = f"order-{suffix()}", f"later-{suffix()}"
    declined = CardDeclined("card declined")
    conn = db.connect()
    try:
        with kit.client(p) as client:
            with (
                pytest.raises(CardDeclined) as raised,
                client.transaction(Message(failed, p.topic, b"x"), conn) as tx,
            ):
                insert(conn, table, failed, "paid")
                raise declined
            assert raised.value is declined, "the work's own exception, not another"
            assert tx.outcome == Outcome.ROLLED_BACK
            assert client.get(failed).status == MessageStatus.ROLLED_BACK
            with client.transaction(Message(later, p.topic, b"later"), conn) as tx2:
                insert(conn, table, later, "paid")
            assert tx2.outcome == Outcome.COMMITTED
    finally:
        conn.close()
    assert business_rows(db, table) == [(later, "paid")]
    assert marker(db, p.biz_id, failed) == []
    recs = read_topic(
        kit.kafka, p.topic, lambda rs: any(r.header("trustmsg-message-key") == later for r in rs)
    )
    assert [r.header("trustmsg-message-key") for r in recs] == [later]


@pytest.mark.asyncio
async def test_S02_async_sqlalchemy_failed_work_is_rolled_back(kit: Kit, postgres_db: DB) -> None:
    """AsyncClient with an SQLAlchemy AsyncSession (psycopg's async driver)."""
    from sqlalchemy.ext.asyncio import AsyncSession

    db = postgres_db
    p = kit.register("s02a")
    table = db.business_table()
    key = f"order-{suffix()}"
    engine = create_async_engine(sa_url("postgres", db.url, "psycopg"))
    try:
        async with kit.async_client(p) as client, AsyncSession(engine) as session:
            with pytest.raises(ZeroDivisionError):
                async with client.transaction(Message(key, p.topic, b"x"), session) as tx:
                    await session.execute(
                        sa.text(f"INSERT INTO {table} (id, note) VALUES (:id, 'x')"), {"id": key}
                    )
                    _ = 1 / 0
            assert tx.outcome == Outcome.ROLLED_BACK
            assert (await client.get(key)).status == MessageStatus.ROLLED_BACK
    finally:
        await engine.dispose()
    assert business_rows(db, table) == []
    assert marker(db, p.biz_id, key) == []


# --- S03 -----------------------------------------------------------------


@pytest.mark.parametrize("framework", ["fastapi", "flask"])
def test_S03_crash_after_local_commit_is_committed_by_check_back(
    kit: Kit, db: DB, framework: str, serve_asgi: Any, serve_wsgi: Any
) -> None:
    calls: list[trustmsg.CheckRequest] = []
    decide_from_barrier = barrier.decider(db.connect)

    def decide(request: trustmsg.CheckRequest) -> str:
        calls.append(request)
        return decide_from_barrier(request)

    # The endpoint needs the producer's secret, and the producer its URL: register, then serve.
    p = kit.register("s03")
    if framework == "fastapi":
        import fastapi

        app = fastapi.FastAPI()
        app.routes.append(CheckBackASGI(p.secret, decide).route())
        url = serve_asgi(app) + "/trustmsg/check"
    else:
        import flask

        fapp = flask.Flask(__name__)
        fapp.register_blueprint(flask_blueprint(p.secret, decide))
        url = serve_wsgi(fapp) + "/trustmsg/check"
    kit.admin(
        "PUT",
        f"/v1/producers/{p.biz_id}",
        {"verify_url": url, "topics": [p.topic], "first_verify_after_ms": 1000},
    )
    table = db.business_table()
    key = f"order-{suffix()}"
    conn = db.connect()
    try:
        with kit.client(p) as client:
            view = client.prepare(Message(key, p.topic, PAYLOAD, headers=HEADERS))
            with LocalTransaction(conn, p.biz_id, key):
                insert(conn, table, key, "paid")
            # ... and the process stops here: the commit call is never made.
            done = kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT, secs=30)
            assert done.id == view.id
    finally:
        conn.close()
    assert calls, "trustmsg's check-back never reached the handler"
    assert calls[0].message_id == view.id and calls[0].message_key == key and calls[0].biz_id == p.biz_id
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert_delivered(recs[0], key, None, PAYLOAD, HEADERS, view.id)


# --- S07 -----------------------------------------------------------------


def test_S07_inbox_drops_a_redelivered_record_and_keeps_the_work_atomic(kit: Kit, db: DB) -> None:
    p = kit.register("s07")
    first, failing = f"order-{suffix()}", f"order-{suffix()}"
    with kit.client(p) as client:
        for key in (first, failing):
            client.prepare(Message(key, p.topic, key.encode()))
            client.commit(key)
    msgs = consume(kit.kafka, p.topic, lambda ms: len(ms) >= 2)
    by_key = {Record(m.key(), m.value(), m.headers()).header("trustmsg-message-key"): m for m in msgs}
    table = db.business_table()
    group = f"billing-{suffix()}"
    conn = db.connect()

    def work(c: Any) -> str:
        insert(c, table, "charge-1", "once")
        return "charged"

    try:
        done = inbox.process(conn, group, by_key[first], work)
        assert done == inbox.Processed(repeat=False, value="charged")
        again = inbox.process(conn, group, by_key[first], work)
        assert again.repeat
        assert business_rows(db, table) == [("charge-1", "once")]

        def failing_work(c: Any) -> None:
            insert(c, table, "charge-2", "failed")
            raise CardDeclined("declined")

        with pytest.raises(CardDeclined):
            inbox.process(conn, group, by_key[failing], failing_work)
        assert business_rows(db, table) == [("charge-1", "once")]
        ids = [
            int(r[0])
            for r in db.query("SELECT message_id FROM trustmsg_inbox WHERE consumer_group = %s", (group,))
        ]
        assert ids == [inbox.message_id(by_key[first].headers())]
        # Processed again later: it runs.
        assert not inbox.process(
            conn, group, by_key[failing], lambda c: insert(c, table, "charge-2", "ok")
        ).repeat
        assert business_rows(db, table) == [("charge-1", "once"), ("charge-2", "ok")]

        # A record that is not trustmsg's is refused, nothing written.
        from confluent_kafka import Producer

        foreign_topic = f"py.foreign.{suffix()}"
        producer = Producer({"bootstrap.servers": kit.kafka})
        producer.produce(foreign_topic, key=b"x", value=b"y", headers=[("content-type", b"text/plain")])
        producer.flush(10)
        foreign = consume(kit.kafka, foreign_topic, lambda ms: len(ms) >= 1)[0]
        with pytest.raises(trustmsg.NoMessageIdError):
            inbox.process(conn, group, foreign, work)
        assert business_rows(db, table) == [("charge-1", "once"), ("charge-2", "ok")]
    finally:
        conn.close()


@pytest.mark.asyncio
async def test_S07_async_inbox(kit: Kit, postgres_db: DB) -> None:
    db = postgres_db
    p = kit.register("s07a")
    key = f"order-{suffix()}"
    with kit.client(p) as client:
        client.prepare(Message(key, p.topic, b"x"))
        view = client.commit(key)
    msg = (await asyncio.to_thread(consume, kit.kafka, p.topic, lambda ms: len(ms) >= 1))[0]
    table = db.business_table()
    conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))

    async def work(c: Any) -> int:
        await c.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", (key, "async"))
        return 1

    try:
        assert (await inbox.aprocess(conn, "billing", msg, work)).value == 1
        assert (await inbox.aprocess(conn, "billing", msg, work)).repeat
        assert (await inbox.aprocess(conn, "billing", view.id, work)).repeat
    finally:
        await conn.close()
    assert business_rows(db, table) == [(key, "async")]


# --- S08 -----------------------------------------------------------------


def test_S08_kafka_way_in_delivers(kit: Kit) -> None:
    p = kit.register("s08")
    key = f"order-{suffix()}"
    with Submitter(kit.kafka, kit.submit_topic, p.biz_id, p.secret) as submitter:
        prepared = submitter.prepare(Message(key, p.topic, PAYLOAD, key="customer-7", headers=HEADERS))
        committed = submitter.commit(key)
        assert (committed.partition, committed.offset) != (prepared.partition, prepared.offset)
    with kit.client(p) as client:
        view = kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT)
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    assert recs[0].key == b"customer-7"
    assert recs[0].value == PAYLOAD
    for name, value in HEADERS.items():
        assert recs[0].header(name) == value
    assert recs[0].header("trustmsg-message-id") == str(view.id)
    assert not any(n.startswith("trustmsg-op") or n == "trustmsg-signature" for n, _ in recs[0].headers)


def test_S08_kafka_way_in_with_the_transaction_helper(kit: Kit, db: DB) -> None:
    """The helper over the Submitter: prepare record, local transaction with
    the barrier marker, commit record; and a failed block submits the rollback."""
    p = kit.register("s08t")
    table = db.business_table()
    key, failed = f"order-{suffix()}", f"order-{suffix()}"
    conn = db.connect()
    try:
        with Submitter(kit.kafka, kit.submit_topic, p.biz_id, p.secret) as submitter:
            with submitter.transaction(Message(key, p.topic, PAYLOAD, headers=HEADERS), conn) as tx:
                insert(conn, table, key, "paid")
            assert tx.outcome == Outcome.COMMITTED
            assert isinstance(tx.message, trustmsg.submit.Submitted)
            with (
                pytest.raises(CardDeclined),
                submitter.transaction(Message(failed, p.topic, b"x"), conn) as tx2,
            ):
                insert(conn, table, failed, "paid")
                raise CardDeclined("declined")
            assert tx2.outcome == Outcome.ROLLED_BACK
    finally:
        conn.close()
    assert business_rows(db, table) == [(key, "paid")]
    with kit.client(p) as client:
        view = kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT)
        kit.wait_status(client, failed, MessageStatus.ROLLED_BACK)
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    assert_delivered(recs[0], key, None, PAYLOAD, HEADERS, view.id)


def test_S08_submit_records_are_the_vectors_records(kit: Kit) -> None:
    """What the Submitter writes to the submit topic is the vectors' record, byte for byte."""
    from .conftest import vector

    case = vector("submit-records.json")["cases"][0]
    p = kit.register("s08v")
    topic = f"py.s08v.{suffix()}"
    key = case["message_key"] + "-" + suffix()
    with Submitter(kit.kafka, topic, p.biz_id, p.secret) as submitter:
        submitter.prepare(
            Message(key, case["topic"], b'{"total":42}', key=case["key"], headers=case["headers"])
        )
    rec = read_topic(kit.kafka, topic, lambda rs: len(rs) >= 1)[0]
    want = trustmsg.submit.submit_record(
        p.secret, "prepare", p.biz_id, key, case["topic"], case["key"], case["headers"], b'{"total":42}'
    )
    assert rec.key == want.key and rec.value == want.value
    assert rec.headers == want.headers


# --- S09 -----------------------------------------------------------------


def test_S09_local_message_table_delivers(kit: Kit, mysql_db: DB) -> None:
    db = mysql_db
    topic = f"{kit.outbox_topic_prefix}py.{suffix()}"
    kept, dropped = f"order-{suffix()}", f"order-{suffix()}"
    table = db.business_table()
    conn = db.connect()
    try:
        conn.begin()
        insert(conn, table, kept, "paid")
        row_id = outbox.enqueue(conn, Message(kept, topic, PAYLOAD, key="customer-7", headers=HEADERS))
        conn.commit()
        conn.begin()
        insert(conn, table, dropped, "paid")
        outbox.enqueue(conn, Message(dropped, topic, b"never"))
        conn.rollback()
    finally:
        conn.close()
    assert row_id > 0
    assert db.query("SELECT id FROM trustmsg_outbox WHERE message_key = %s", (dropped,)) == []
    recs = read_topic(kit.kafka, topic, lambda rs: len(rs) >= 1)
    deadline = time.monotonic() + 30
    while db.query("SELECT status FROM trustmsg_outbox WHERE id = %s", (row_id,)) != [(2,)]:
        assert time.monotonic() < deadline, "the row was not marked relayed"
        time.sleep(0.2)
    time.sleep(1.0)
    recs = read_topic(kit.kafka, topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    assert recs[0].key == b"customer-7"
    assert recs[0].value == PAYLOAD
    for name, value in HEADERS.items():
        assert recs[0].header(name) == value
    assert recs[0].header("trustmsg-message-key") in (kept, None)
    assert business_rows(db, table) == [(kept, "paid")]


def _vector_table(db: DB) -> str:
    name = f"outbox_vectors_{suffix()}"
    script = trustmsg.schema.sql(f"outbox-{db.dialect}.sql").replace("trustmsg_outbox", name)
    conn = db.connect()
    try:
        for statement in trustmsg._db.statements(script):
            with conn.cursor() as cur:
                cur.execute(statement)
        conn.commit()
    finally:
        conn.close()
    return name


@pytest.mark.parametrize("dialect", ["mysql", "postgres"])
def test_S09_every_outbox_vector_writes_its_row(dialect: str, mysql_db: DB, postgres_db: DB) -> None:
    import base64

    from .conftest import vector
    from .test_vectors import _message

    db = mysql_db if dialect == "mysql" else postgres_db
    table = _vector_table(db)
    for case in vector("outbox-rows.json")["valid"]:
        conn = db.connect()
        try:
            row_id = outbox.enqueue(conn, _message(case["message"]), table=table)
            conn.commit()
        finally:
            conn.close()
        if dialect == "mysql":
            delay = "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), deliver_at)"
        else:
            delay = "(EXTRACT(EPOCH FROM deliver_at - now()) * 1000000)::bigint"
        got = db.query(
            f"SELECT message_key, topic, record_key, payload, headers, traceparent, {delay}, status, "
            f"retry_count, content_type, next_retry_time FROM {table} WHERE id = %s",
            (row_id,),
        )[0]
        row = case["row"]
        assert got[:3] == (row["message_key"], row["topic"], row["record_key"]), case["name"]
        assert bytes(got[3]) == base64.b64decode(row["payload_base64"]), case["name"]
        headers = got[4] if got[4] is None or isinstance(got[4], dict) else json.loads(got[4])
        assert headers == row["headers"], case["name"]
        assert got[5] == row["traceparent"], case["name"]
        if row["deliver"] is None:
            assert got[6] is None, case["name"]
        else:
            want_us = row["deliver"]["after_ms"] * 1000
            assert want_us - 10_000_000 < int(got[6]) <= want_us, case["name"]
        assert got[7:] == (0, 0, None, None), case["name"]
        db.run(f"DELETE FROM {table} WHERE id = %s", (row_id,))
    for case in vector("outbox-rows.json")["invalid"]:
        with pytest.raises(trustmsg.InvalidRequestError) as e:
            outbox.enqueue(db.connect(), _message(case["message"]), table=table)
        assert e.value.code == case["error"]
    assert db.query(f"SELECT COUNT(*) FROM {table}") == [(0,)]


# --- S10 -----------------------------------------------------------------


def proxy_post(kit: Kit, path: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(
        kit.proxy_url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as a:
        a.read()


def proxy_seen(kit: Kit, match: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{kit.proxy_url}/_kit/requests?match={match}", timeout=10) as a:
        return list(json.loads(a.read()))


def test_S10_503_is_retried_with_backoff_and_409_is_not(kit: Kit) -> None:
    p = kit.register("s10")
    key = f"order-{suffix()}-x1"
    # The default policy but for a longer first delay: 0.25 s then 0.5 s (±20 %).
    # Each gap is at least its delay less the jitter, not gap against gap: a
    # request held up on a loaded machine makes one gap longer than the next.
    retry = RetryPolicy(min_delay=0.25)
    with trustmsg.Client(kit.proxy_url, p.biz_id, p.token, retry=retry) as client:
        client.prepare(Message(key, p.topic, b"x"))
        proxy_post(kit, "/_kit/faults", {"match": key, "status": 503, "count": 2})
        view = client.commit(key)
        assert view.status == MessageStatus.COMMITTED
        commits = [r for r in proxy_seen(kit, key) if r["path"] == "/v1/messages/commit"]
        assert [r["status"] for r in commits] == [503, 503, 200]
        gaps = [b["at_ms"] - a["at_ms"] for a, b in zip(commits, commits[1:])]
        assert gaps[0] >= 190 and gaps[1] >= 390, gaps

        other = f"order-{suffix()}-x2"
        client.prepare(Message(other, p.topic, b"first"))
        started = time.monotonic()
        with pytest.raises(ConflictError) as e:
            client.prepare(Message(other, p.topic, b"second"))
        assert time.monotonic() - started < 1.0, "the 409 waited for retries"
        assert (e.value.code, e.value.status) == ("prepare_conflict", 409)
        prepares = [r for r in proxy_seen(kit, other) if r["path"] == "/v1/messages/prepare"]
        assert [r["status"] for r in prepares] == [201, 409]


@pytest.mark.asyncio
async def test_S10_async_503_is_retried_and_409_is_not(kit: Kit) -> None:
    p = kit.register("s10a")
    key = f"order-{suffix()}-y1"
    async with trustmsg.AsyncClient(kit.proxy_url, p.biz_id, p.token) as client:
        await client.prepare(Message(key, p.topic, b"x"))
        await asyncio.to_thread(proxy_post, kit, "/_kit/faults", {"match": key, "status": 503, "count": 2})
        assert (await client.commit(key)).status == MessageStatus.COMMITTED
        commits = [
            r for r in await asyncio.to_thread(proxy_seen, kit, key) if r["path"] == "/v1/messages/commit"
        ]
        assert [r["status"] for r in commits] == [503, 503, 200]
        with pytest.raises(ConflictError) as e:
            await client.prepare(Message(key, p.topic, b"other"))
        assert e.value.code == "prepare_conflict"
        prepares = [
            r for r in await asyncio.to_thread(proxy_seen, kit, key) if r["path"] == "/v1/messages/prepare"
        ]
        assert len(prepares) == 2


def test_a_commit_that_cannot_be_delivered_is_left_to_check_back(kit: Kit, mysql_db: DB) -> None:
    """trustmsg answers 503 to every commit: the helper does not raise (the
    local transaction committed); the outcome says check-back will decide."""
    p = kit.register("left")
    key = f"order-{suffix()}-z1"
    conn = mysql_db.connect()
    retry = RetryPolicy(max_retries=2, min_delay=0.01, max_delay=0.02)
    try:
        with trustmsg.Client(kit.proxy_url, p.biz_id, p.token, retry=retry) as client:
            client.prepare(Message(key, p.topic, b"x"))
            proxy_post(kit, "/_kit/faults", {"match": "/v1/messages/commit", "status": 503, "count": 3})
            with client.transaction(Message(key, p.topic, b"x"), conn) as tx:
                pass
            assert tx.outcome == Outcome.COMMIT_LEFT_TO_CHECK_BACK
            assert isinstance(tx.decision_error, trustmsg.UnavailableError)
            assert tx.decision_error.attempts == 3 and tx.decision_error.status == 503
            assert tx.decision_error.code == "store_unavailable"
    finally:
        conn.close()
    assert barrier.check(mysql_db.connect, p.biz_id, key) == Decision.COMMIT


def test_connection_errors_are_retried_then_unavailable() -> None:
    from .conftest import free_port

    retry = RetryPolicy(max_retries=2, min_delay=0.01, max_delay=0.02)
    client = trustmsg.Client(f"http://127.0.0.1:{free_port()}", "shop", "t", retry=retry)
    with client, pytest.raises(trustmsg.UnavailableError) as e:
        client.get("order-1")
    assert e.value.attempts == 3
    assert e.value.status is None


def test_opentelemetry_context_is_carried_on_prepare(kit: Kit) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    p = kit.register("otel")
    tracer = TracerProvider().get_tracer("test")
    with kit.client(p) as client:
        with tracer.start_as_current_span("place-order") as span:
            view = client.prepare(Message(f"order-{suffix()}", p.topic, b"x"))
        assert view.trace_id == format(span.get_span_context().trace_id, "032x")
        explicit = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        view = client.prepare(Message(f"order-{suffix()}", p.topic, b"x", traceparent=explicit))
        assert view.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
        assert client.prepare(Message(f"order-{suffix()}", p.topic, b"x")).trace_id is None
    assert trace.get_current_span().get_span_context().is_valid is False


def test_errors_carry_the_services_code_and_status(kit: Kit) -> None:
    p = kit.register("errors")
    with kit.client(p) as client:
        with pytest.raises(trustmsg.NotFoundError) as nf:
            client.commit(f"never-{suffix()}")
        assert (nf.value.status, nf.value.code) == (404, "message_not_found")
        with pytest.raises(trustmsg.ForbiddenError) as fb:
            client.prepare(Message(f"k-{suffix()}", "not.allowed", b"x"))
        assert fb.value.status == 403 or fb.value.code == "topic_not_allowed"
    with (
        trustmsg.Client(kit.url, p.biz_id, "wrong-token") as bad,
        pytest.raises(trustmsg.UnauthorizedError) as ua,
    ):
        bad.get("k")
    assert ua.value.status == 401


_ = (records, Record)

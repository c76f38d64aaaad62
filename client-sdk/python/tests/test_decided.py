"""The contract kit's scenarios S11-S14: the transaction helper runs no
local work for a message decided before, sends what the barrier knows, and
raises what trustmsg refuses after the local work. Against the real trustmsg
binary, MariaDB and PostgreSQL, and the kit's Kafka broker."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import psycopg
import pymysql
import pytest

import trustmsg
from trustmsg import (
    AlreadyCommittedError,
    AlreadyRolledBackError,
    CommitRejectedError,
    ConflictError,
    Decision,
    Message,
    MessageStatus,
    Outcome,
    RollbackRejectedError,
    barrier,
)

from .conftest import DB, Kit, Producer, pg_dsn, read_topic, suffix


class CardDeclined(Exception):
    pass


class Crash(Exception):
    """What the test hook raises: the process "dies" after its local COMMIT."""


def rows(db: DB, table: str) -> list[tuple[Any, ...]]:
    return db.query(f"SELECT id, note FROM {table} ORDER BY id")


def markers(db: DB, biz_id: str, key: str) -> list[str]:
    found = db.query("SELECT op FROM trustmsg_barrier WHERE biz_id = %s AND message_key = %s", (biz_id, key))
    return [r[0].decode() if isinstance(r[0], bytes) else r[0] for r in found]


def insert(conn: Any, table: str, key: str, note: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} (id, note) VALUES (%s, %s)", (key, note))


#: Every message of these tests has this record key: one partition, so a
#: sentinel committed last is read after anything sent before it.
RECORD_KEY = "customer-7"


def keys_in_kafka(kit: Kit, p: Producer) -> list[str]:
    """The message keys on the producer's topic, read until a sentinel
    committed now shows (and half a second more)."""
    sentinel = f"sentinel-{suffix()}"
    with kit.client(p) as client:
        client.prepare(Message(sentinel, p.topic, b"sentinel", key=RECORD_KEY))
        client.commit(sentinel)

    def seen(rs: list[Any]) -> bool:
        return any(r.header("trustmsg-message-key") == sentinel for r in rs)

    read_topic(kit.kafka, p.topic, seen)
    time.sleep(0.5)
    recs = read_topic(kit.kafka, p.topic, seen)
    return [
        str(r.header("trustmsg-message-key")) for r in recs if r.header("trustmsg-message-key") != sentinel
    ]


# --- S11 -----------------------------------------------------------------


def test_S11_a_retry_after_rollback_is_refused_before_any_local_work(kit: Kit, db: DB) -> None:
    p = kit.register("s11")
    table = db.business_table()
    key, tombstone, checked = f"order-{suffix()}", f"order-{suffix()}", f"order-{suffix()}"
    ran: list[str] = []
    conn = db.connect()
    try:
        with kit.client(p) as client:
            with (
                pytest.raises(CardDeclined),
                client.transaction(Message(key, p.topic, b"x", key=RECORD_KEY), conn),
            ):
                insert(conn, table, key, "first")
                raise CardDeclined("declined")
            assert client.get(key).status == MessageStatus.ROLLED_BACK

            # The client's retry: prepare is refused, the block never runs.
            with (
                pytest.raises(AlreadyRolledBackError) as refused,
                client.transaction(Message(key, p.topic, b"x", key=RECORD_KEY), conn),
            ):
                ran.append(key)
                insert(conn, table, key, "retry")
            assert (refused.value.status, refused.value.code) == (409, "already_rolled_back")
            assert isinstance(refused.value, ConflictError), (
                "old `except ConflictError` code still catches it"
            )
            assert client.get(key).status == MessageStatus.ROLLED_BACK

            # A rollback before any prepare (a tombstone): refused the same way.
            client.rollback(tombstone)
            with (
                pytest.raises(AlreadyRolledBackError) as tomb,
                client.transaction(Message(tombstone, p.topic, b"x", key=RECORD_KEY), conn),
            ):
                ran.append(tombstone)
            assert (tomb.value.status, tomb.value.code) == (409, "rolled_back")

            # Check-back answered rollback first (the barrier holds the
            # rollback marker) while the message is still PREPARED: the
            # helper sends the rollback itself and runs nothing.
            client.prepare(Message(checked, p.topic, b"x", key=RECORD_KEY))
            assert barrier.check(db.connect, p.biz_id, checked) == Decision.ROLLBACK
            with (
                pytest.raises(AlreadyRolledBackError) as marked,
                client.transaction(Message(checked, p.topic, b"x", key=RECORD_KEY), conn),
            ):
                ran.append(checked)
            assert marked.value.status is None and marked.value.view is not None
            assert client.get(checked).status == MessageStatus.ROLLED_BACK
    finally:
        conn.close()
    assert ran == []
    assert rows(db, table) == []
    assert markers(db, p.biz_id, key) == [] and markers(db, p.biz_id, tombstone) == []
    assert markers(db, p.biz_id, checked) == ["rollback"]
    assert keys_in_kafka(kit, p) == []


@pytest.mark.asyncio
async def test_S11_async_a_retry_after_rollback_is_refused(kit: Kit, db: DB) -> None:
    p = kit.register("s11a")
    table = db.business_table()
    key = f"order-{suffix()}"
    conn: Any = (
        await psycopg.AsyncConnection.connect(pg_dsn(db.url)) if db.dialect == "postgres" else db.connect()
    )
    ran: list[str] = []
    try:
        async with kit.async_client(p) as client:
            with pytest.raises(CardDeclined):
                async with client.transaction(Message(key, p.topic, b"x"), conn):
                    raise CardDeclined("declined")
            with pytest.raises(AlreadyRolledBackError) as refused:
                async with client.transaction(Message(key, p.topic, b"x"), conn):
                    ran.append(key)
            assert refused.value.code == "already_rolled_back"
            assert (await client.get(key)).status == MessageStatus.ROLLED_BACK
    finally:
        c = conn.close()
        if asyncio.iscoroutine(c):
            await c
    assert ran == []
    assert rows(db, table) == []
    assert markers(db, p.biz_id, key) == []


# --- S12 -----------------------------------------------------------------


def test_S12_a_retry_that_finds_its_local_commit_commits_at_once(kit: Kit, db: DB, serve_wsgi: Any) -> None:
    check_backs: list[str] = []

    def counting(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        check_backs.append(str(environ.get("PATH_INFO")))
        start_response("500 Internal Server Error", [("content-type", "text/plain")])
        return [b"not expected"]

    p = kit.register("s12")
    kit.admin(
        "PUT",
        f"/v1/producers/{p.biz_id}",
        {"verify_url": serve_wsgi(counting) + "/check", "topics": [p.topic], "first_verify_after_ms": 60000},
    )
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b'{"order":12}')
    ran: list[str] = []

    def crash() -> None:
        raise Crash("killed after the local COMMIT")

    with kit.client(p) as client:
        first = db.connect()
        try:
            with pytest.raises(Crash), client.transaction(message, first, after_local_commit=crash) as tx:
                insert(first, table, key, "placed")
            assert tx.outcome == Outcome.LEFT_TO_CHECK_BACK
        finally:
            first.close()
        assert rows(db, table) == [(key, "placed")]
        assert markers(db, p.biz_id, key) == ["commit"]
        assert client.get(key).status == MessageStatus.PREPARED, "the hook stopped the decision"

        retry = db.connect()
        try:
            with (
                pytest.raises(AlreadyCommittedError) as placed,
                client.transaction(message, retry, after_local_commit=crash),
            ):
                ran.append(key)
                insert(retry, table, key, "again")
        finally:
            retry.close()
        assert placed.value.view is not None and placed.value.view.status == MessageStatus.COMMITTED
        assert placed.value.decision_error is None
        assert client.get(key).status == MessageStatus.COMMITTED, "committed when the call returned"
    assert ran == []
    assert rows(db, table) == [(key, "placed")]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    time.sleep(0.5)
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert [r.header("trustmsg-message-key") for r in recs] == [key]
    assert recs[0].header("trustmsg-message-id") == str(placed.value.view.id)
    assert check_backs == []


@pytest.mark.asyncio
async def test_S12_async_hook_and_retry(kit: Kit, postgres_db: DB) -> None:
    db = postgres_db
    p = kit.register("s12a")
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b"x")

    async def crash() -> None:
        raise Crash("killed")

    async with kit.async_client(p) as client:
        conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
        try:
            with pytest.raises(Crash):
                async with client.transaction(message, conn, after_local_commit=crash):
                    await conn.execute(f"INSERT INTO {table} (id, note) VALUES (%s, 'placed')", (key,))
            with pytest.raises(AlreadyCommittedError) as placed:
                async with client.transaction(message, conn):
                    await conn.execute(f"INSERT INTO {table} (id, note) VALUES (%s, 'again')", (key,))
        finally:
            await conn.close()
        assert placed.value.view is not None and placed.value.view.status == MessageStatus.COMMITTED
        assert (await client.get(key)).status == MessageStatus.COMMITTED
    assert rows(db, table) == [(key, "placed")]


# --- S13 -----------------------------------------------------------------


def test_S13_two_identical_requests_at_once_make_one_commit_and_one_message(kit: Kit, db: DB) -> None:
    p = kit.register("s13")
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b'{"order":13}', key="customer-13")
    start = threading.Barrier(2)
    answers: list[str] = []
    unexpected: list[BaseException] = []

    def place(client: trustmsg.Client) -> None:
        conn = db.connect()
        try:
            start.wait(10)
            with client.transaction(message, conn):
                insert(conn, table, key, "placed")
                time.sleep(0.2)  # hold the marker's lock while the other request comes in
            answers.append("placed")
        except AlreadyCommittedError:
            answers.append("already_placed")
        except BaseException as e:
            unexpected.append(e)
        finally:
            conn.close()

    with kit.client(p) as client:
        threads = [threading.Thread(target=place, args=(client,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert unexpected == []
        assert sorted(answers) in (["already_placed", "placed"], ["placed", "placed"])
        assert client.get(key).status == MessageStatus.COMMITTED
    assert rows(db, table) == [(key, "placed")]
    assert markers(db, p.biz_id, key) == ["commit"]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    time.sleep(0.5)
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len({r.header("trustmsg-message-id") for r in recs}) == 1
    assert {r.header("trustmsg-message-key") for r in recs} == {key}


@pytest.mark.asyncio
async def test_S13_async_two_tasks_at_once(kit: Kit, postgres_db: DB) -> None:
    db = postgres_db
    p = kit.register("s13a")
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b"x")

    async def place(client: trustmsg.AsyncClient) -> str:
        conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
        try:
            async with client.transaction(message, conn):
                await conn.execute(f"INSERT INTO {table} (id, note) VALUES (%s, 'placed')", (key,))
                await asyncio.sleep(0.2)
            return "placed"
        except AlreadyCommittedError:
            return "already_placed"
        finally:
            await conn.close()

    async with kit.async_client(p) as client:
        answers = await asyncio.gather(place(client), place(client))
        assert sorted(answers) in (["already_placed", "placed"], ["placed", "placed"])
        assert (await client.get(key)).status == MessageStatus.COMMITTED
    assert rows(db, table) == [(key, "placed")]


# --- S14 -----------------------------------------------------------------


def test_S14_a_prepare_answered_committed_runs_no_local_work(kit: Kit, db: DB) -> None:
    p = kit.register("s14")
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b'{"order":14}', key=RECORD_KEY)
    entered: list[str] = []
    conn = db.connect()
    try:
        with kit.client(p) as client:
            with client.transaction(message, conn) as tx:
                insert(conn, table, key, "placed")
            assert tx.outcome == Outcome.COMMITTED
            # 200 with status COMMITTED: the client raises it, with the view.
            with pytest.raises(AlreadyCommittedError) as again:
                client.prepare(message)
            assert again.value.view is not None and again.value.view.status == MessageStatus.COMMITTED
            with pytest.deprecated_call():
                old = kit.client(p, raise_on_decided=False)
            with old:
                assert old.prepare(message).status == MessageStatus.COMMITTED  # the value, as before 0.2
            with pytest.raises(AlreadyCommittedError) as placed, client.transaction(message, conn):
                entered.append(key)
            assert placed.value.view is not None
            assert placed.value.view.status == MessageStatus.COMMITTED
            assert tx.message is not None and placed.value.view.id == tx.message.id
            assert placed.value.code == "already_committed"

            # The barrier's rows purged (a retention job): prepare's COMMITTED
            # alone still keeps the work from running a second time.
            db.run("DELETE FROM trustmsg_barrier WHERE biz_id = %s AND message_key = %s", (p.biz_id, key))
            with pytest.raises(AlreadyCommittedError), client.transaction(message, conn):
                entered.append(key)
                insert(conn, table, f"{key}-again", "placed twice")
    finally:
        conn.close()
    assert entered == []
    assert rows(db, table) == [(key, "placed")]
    assert keys_in_kafka(kit, p) == [key]


@pytest.mark.asyncio
async def test_S14_async_a_prepare_answered_committed_runs_no_local_work(kit: Kit, postgres_db: DB) -> None:
    db = postgres_db
    p = kit.register("s14a")
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b"x")
    entered: list[str] = []
    conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
    try:
        async with kit.async_client(p) as client:
            async with client.transaction(message, conn):
                pass
            with pytest.raises(AlreadyCommittedError) as placed:
                async with client.transaction(message, conn):
                    entered.append(key)
            assert placed.value.view is not None and placed.value.view.status == MessageStatus.COMMITTED
    finally:
        await conn.close()
    assert entered == []


# --- refusals after the local work are raised, not reported ---------------


def test_a_commit_refused_after_the_local_commit_raises(kit: Kit, db: DB) -> None:
    """An operator rolls the message back between the local COMMIT and the
    commit call (the hook is that moment): the commit is refused 409
    already_rolled_back, and the helper raises it."""
    p = kit.register("rejected")
    table = db.business_table()
    key = f"order-{suffix()}"
    conn = db.connect()
    try:
        with kit.client(p) as client:

            def operator_rolls_back() -> None:
                client.rollback(key)

            with (
                pytest.raises(CommitRejectedError) as rejected,
                client.transaction(Message(key, p.topic, b"x"), conn, after_local_commit=operator_rolls_back),
            ):
                insert(conn, table, key, "stored")
            assert (rejected.value.status, rejected.value.code) == (409, "already_rolled_back")
            assert isinstance(rejected.value.error, AlreadyRolledBackError)
            assert rejected.value.transaction.outcome == Outcome.COMMIT_REJECTED
            assert rejected.value.__cause__ is rejected.value.error
    finally:
        conn.close()
    assert rows(db, table) == [(key, "stored")], "the local work is committed: that is why it raises"


def test_a_rollback_refused_after_the_local_rollback_raises(kit: Kit, mysql_db: DB) -> None:
    p = kit.register("rbrejected")
    table = mysql_db.business_table()
    key = f"order-{suffix()}"
    declined = CardDeclined("declined")
    conn = mysql_db.connect()
    try:
        with kit.client(p) as client:
            with (
                pytest.raises(RollbackRejectedError) as rejected,
                client.transaction(Message(key, p.topic, b"x"), conn),
            ):
                insert(conn, table, key, "never")
                client.commit(key)  # someone else decided meanwhile
                raise declined
            assert (rejected.value.status, rejected.value.code) == (409, "already_committed")
            assert rejected.value.work_error is declined
            assert rejected.value.transaction.outcome == Outcome.ROLLBACK_REJECTED
    finally:
        conn.close()
    assert rows(mysql_db, table) == []


def test_a_connection_lost_before_commit_is_settled_from_the_barrier_on_a_new_connection(
    kit: Kit, db: DB
) -> None:
    """The local transaction's connection is killed inside the block: its
    COMMIT fails and the same connection cannot ask the barrier. The helper
    asks on a new connection (opened like the first), which answers rollback
    (the server rolled the transaction back), and sends that rollback."""
    p = kit.register("lost")
    table = db.business_table()
    key = f"order-{suffix()}"
    conn = db.connect()
    if db.dialect == "mysql":
        conn_id = conn.thread_id()
        kill = ("KILL %s", (conn_id,))
    else:
        kill = ("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    try:
        with kit.client(p) as client:
            with (
                pytest.raises((pymysql.err.Error, psycopg.Error)) as failed,
                client.transaction(Message(key, p.topic, b"x"), conn) as tx,
            ):
                insert(conn, table, key, "lost")
                db.run(*kill)
            assert not isinstance(failed.value, trustmsg.OutcomeUnknownError), failed.value
            assert tx.outcome == Outcome.ROLLED_BACK
            assert client.get(key).status == MessageStatus.ROLLED_BACK
    finally:
        with contextlib.suppress(Exception):  # it is dead already
            conn.close()
    assert rows(db, table) == []
    assert markers(db, p.biz_id, key) == ["rollback"]


@pytest.mark.asyncio
async def test_async_a_connection_lost_before_commit_is_settled_on_a_new_connection(
    kit: Kit, postgres_db: DB
) -> None:
    db = postgres_db
    p = kit.register("losta")
    table = db.business_table()
    key = f"order-{suffix()}"
    conn = await psycopg.AsyncConnection.connect(pg_dsn(db.url))
    try:
        async with kit.async_client(p) as client:
            with pytest.raises(psycopg.Error):
                async with client.transaction(Message(key, p.topic, b"x"), conn) as tx:
                    await conn.execute(f"INSERT INTO {table} (id, note) VALUES (%s, 'lost')", (key,))
                    db.run("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            assert tx.outcome == Outcome.ROLLED_BACK
            assert (await client.get(key)).status == MessageStatus.ROLLED_BACK
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
    assert rows(db, table) == []
    assert markers(db, p.biz_id, key) == ["rollback"]


def test_a_failed_call_and_its_duplicate_never_store_an_order_whose_message_is_rolled_back(
    kit: Kit, db: DB
) -> None:
    """Two calls with one message at once, the first one's work failing
    while the second waits on the barrier marker: the first sends its
    rollback before it lets the marker go, and the second, whose work
    succeeds, sees the message ROLLED_BACK before its local COMMIT: it rolls
    back and raises AlreadyRolledBackError. Not an order stored whose
    message can never be sent (a refused commit)."""
    p = kit.register("dupfail")
    table = db.business_table()
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b"x")
    in_block = threading.Event()
    outcomes: dict[str, Any] = {}

    def first(client: trustmsg.Client) -> None:
        conn = db.connect()
        try:
            with client.transaction(message, conn) as tx:
                in_block.set()
                time.sleep(1.0)  # the duplicate is waiting on the marker by now
                raise CardDeclined("declined")
        except CardDeclined:
            outcomes["first"] = tx.outcome
        except BaseException as e:
            outcomes["first"] = e
        finally:
            conn.close()

    def second(client: trustmsg.Client) -> None:
        conn = db.connect()
        try:
            with client.transaction(message, conn) as tx:
                insert(conn, table, key, "placed")
            outcomes["second"] = tx.outcome
        except BaseException as e:
            outcomes["second"] = e
        finally:
            conn.close()

    with kit.client(p) as client:
        a = threading.Thread(target=first, args=(client,))
        a.start()
        assert in_block.wait(10)
        b = threading.Thread(target=second, args=(client,))
        b.start()
        a.join(60)
        b.join(60)
        assert outcomes["first"] == Outcome.ROLLED_BACK
        assert isinstance(outcomes["second"], AlreadyRolledBackError), outcomes["second"]
        assert client.get(key).status == MessageStatus.ROLLED_BACK
    assert rows(db, table) == []
    assert markers(db, p.biz_id, key) == []


def test_a_prepare_answered_verify_failed_runs_no_local_work(kit: Kit, db: DB, serve_wsgi: Any) -> None:
    """Check-back gave up on the message (its endpoint failed its one
    attempt): prepare answers VERIFY_FAILED and the helper runs nothing."""

    def failing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("500 Internal Server Error", [("content-type", "text/plain")])
        return [b"down"]

    p = kit.register("verifyfailed")
    kit.admin(
        "PUT",
        f"/v1/producers/{p.biz_id}",
        {
            "verify_url": serve_wsgi(failing) + "/check",
            "topics": [p.topic],
            "first_verify_after_ms": 100,
            "max_verify_attempts": 1,
        },
    )
    key = f"order-{suffix()}"
    message = Message(key, p.topic, b"x")
    entered: list[str] = []
    conn = db.connect()
    try:
        with kit.client(p) as client:
            client.prepare(message)
            kit.wait_status(client, key, "VERIFY_FAILED", secs=30)
            with pytest.raises(trustmsg.NotPreparedError) as refused, client.transaction(message, conn):
                entered.append(key)
            assert refused.value.message_status == "VERIFY_FAILED"
            assert refused.value.view.status == "VERIFY_FAILED"
    finally:
        conn.close()
    assert entered == []
    assert markers(db, p.biz_id, key) == []

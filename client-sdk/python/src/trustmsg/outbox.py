"""The local message table: ``enqueue`` writes a message as a row of
``trustmsg_outbox`` **inside the caller's transaction**, and trustmsg relays
it to Kafka once that transaction commits (``docs/outbox.md``). A rolled-back
transaction leaves no row, so nothing is ever sent for it. No call to
trustmsg on the request path, no prepare, no check-back.

    with conn:                                    # the business transaction
        cur.execute("UPDATE orders SET state = 'paid' WHERE id = %s", (42,))
        outbox.enqueue(conn, Message("order-42-paid", "orders", payload, key="customer-7"))

trustmsg relays the table from MySQL/MariaDB and from PostgreSQL
(``trustmsg serve --outbox-source BIZ_ID=mysql://…`` or
``BIZ_ID=postgres://…``); the row is written here the same way for both.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Optional

from . import _db, _trace
from . import _validate as v
from .errors import InvalidRequestError
from .message import Message

__all__ = ["TABLE", "aenqueue", "enqueue", "row_values"]

TABLE = "trustmsg_outbox"

_COLUMNS = "(message_key, topic, record_key, payload, headers, traceparent, deliver_at)"
_SQL = {
    _db.MYSQL: "INSERT INTO {table} " + _COLUMNS + " VALUES (%s, %s, %s, %s, %s, %s, "
    "COALESCE(%s, UTC_TIMESTAMP(3) + INTERVAL %s MICROSECOND))",
    _db.POSTGRES: "INSERT INTO {table} " + _COLUMNS + " VALUES (%s, %s, %s, %s, %s::jsonb, %s, "
    "COALESCE(%s::timestamptz, now() + %s::bigint * INTERVAL '1 microsecond')) RETURNING id",
}


def row_values(message: Message, dialect: str, *, now: Optional[dt.datetime] = None) -> tuple[object, ...]:
    """The values ``enqueue`` binds for ``message``: message_key, topic,
    record_key, payload, headers (JSON or None), traceparent (None when
    invalid: left out, as trustmsg ignores it), deliver_at, delay in µs."""
    if not isinstance(message, Message):
        raise TypeError(f"message must be a trustmsg.Message, not {type(message).__name__}")
    headers = (
        json.dumps(dict(sorted(message.headers.items())), separators=(",", ":"), ensure_ascii=False)
        if message.headers
        else None
    )
    tp = message.trace_headers().get("traceparent")
    traceparent = _trace.parse_traceparent(tp) if tp else None
    at: Optional[dt.datetime] = None
    delay_us: Optional[int] = None
    if message.deliver_after_ms is not None:
        delay_us = message.deliver_after_ms * 1000
    if message.deliver_at is not None:
        clock = now or dt.datetime.now(dt.timezone.utc)
        t = message.deliver_at.astimezone(dt.timezone.utc)
        t = t.replace(microsecond=t.microsecond // 1000 * 1000)  # the column keeps milliseconds
        if t > clock + dt.timedelta(milliseconds=v.MAX_DELIVERY_DELAY_MS):
            raise InvalidRequestError(
                f"deliver_at {message.deliver_at_text()} is more than 7 days ahead", code="invalid_deliver_at"
            )
        at = t.replace(tzinfo=None) if dialect == _db.MYSQL else t  # MySQL's DATETIME holds UTC
    return (
        message.message_key,
        message.topic,
        message.key,
        message.payload_bytes,
        headers,
        traceparent,
        at,
        delay_us,
    )


def enqueue(conn: Any, message: Message, *, table: str = TABLE) -> int:
    """Writes ``message`` as a pending row of ``table`` through ``conn`` (a
    PyMySQL or psycopg 3 connection, or an SQLAlchemy ``Connection`` /
    ``Session``), inside whatever transaction the caller has open (none is
    begun or committed here). Returns the row's id. Everything trustmsg
    would refuse and the SDK can tell is refused before anything is written,
    with the API's error code (:class:`InvalidRequestError`); a message key
    used before is refused by the table itself (a unique-key error)."""
    table = v.check_table(table)
    db = _db.sync_db(conn)
    values = row_values(message, db.dialect)
    sql = _SQL[db.dialect].format(table=table)
    if db.dialect == _db.POSTGRES:
        row = db.fetchone(sql, values)
        return int(row[0]) if row else 0
    db.execute(sql, values)
    row = db.fetchone("SELECT LAST_INSERT_ID()")
    return int(row[0]) if row else 0


async def aenqueue(conn: Any, message: Message, *, table: str = TABLE) -> int:
    """The asyncio twin of :func:`enqueue`."""
    table = v.check_table(table)
    db = _db.async_db(conn)
    values = row_values(message, db.dialect)
    sql = _SQL[db.dialect].format(table=table)
    if db.dialect == _db.POSTGRES:
        row = await db.fetchone(sql, values)
        return int(row[0]) if row else 0
    await db.execute(sql, values)
    row = await db.fetchone("SELECT LAST_INSERT_ID()")
    return int(row[0]) if row else 0

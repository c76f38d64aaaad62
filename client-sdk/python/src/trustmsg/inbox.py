"""The inbox: process each trustmsg message once, in effect, in a consumer
with its own MySQL/MariaDB or PostgreSQL database.

Delivery is at least once: a record may come again (the forwarder's retry,
a consumer restart before its offset commit). Every record trustmsg sends
carries a stable ``trustmsg-message-id`` header; the inbox keeps one row per
``(consumer group, message id)`` and writes it **in the same local
transaction as the consumer's work**:

- the first delivery inserts the row, runs the work and commits both;
- a repeat finds the row and skips the work (``Processed.repeat``);
- two deliveries at once wait on each other's row lock: the work runs once;
- work that raises rolls back with its row, so the next delivery runs it.

    result = inbox.process(conn, "billing", record, lambda conn: charge(conn, record))
    consumer.commit(record)   # done or a repeat: either way the offset may go on
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from . import _db
from . import _validate as v
from .errors import NoMessageIdError

__all__ = ["MESSAGE_ID_HEADER", "Processed", "aprocess", "message_id", "process"]

T = TypeVar("T")

MESSAGE_ID_HEADER = "trustmsg-message-id"
_ID = re.compile(r"[0-9]{1,20}")
_INSERT = {
    _db.MYSQL: "INSERT IGNORE INTO trustmsg_inbox (consumer_group, message_id) VALUES (%s, %s)",
    _db.POSTGRES: "INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES (%s, %s) "
    "ON CONFLICT (consumer_group, message_id) DO NOTHING",
}

HeaderValue = Union[bytes, str, None]


@dataclass(frozen=True)
class Processed(Generic[T]):
    """What :func:`process` did: ran the work (``repeat`` False, ``value``
    what it returned) or found the message processed already (``repeat``
    True, the work not run)."""

    repeat: bool
    value: Optional[T] = None


def message_id(headers: Optional[Sequence[tuple[str, HeaderValue]]]) -> Optional[int]:
    """The ``trustmsg-message-id`` of a record's headers (confluent-kafka's
    ``message.headers()``: a list of ``(name, value)``), or None when there is
    no usable one: missing, without a value, not a decimal number, 0, or
    beyond 64 bits."""
    for name, value in headers or ():
        if name != MESSAGE_ID_HEADER:
            continue
        if value is None:
            return None
        try:
            text = value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)
        except UnicodeDecodeError:
            return None
        if not _ID.fullmatch(text):
            return None
        n = int(text)
        return n if 0 < n < 2**64 else None
    return None


def _id_of(record: Any) -> int:
    if isinstance(record, int) and not isinstance(record, bool):
        if not 0 < record < 2**64:
            raise NoMessageIdError(f"message id {record} is not an unsigned 64-bit integer above 0")
        return record
    headers = record.headers() if callable(getattr(record, "headers", None)) else None
    found = message_id(headers)
    if found is None:
        raise NoMessageIdError(
            "the record has no usable trustmsg-message-id header; it was not sent by trustmsg and is not "
            "processed (commit its offset or dead-letter it)"
        )
    return found


def process(conn: Any, group: str, record: Any, work: Callable[[Any], T]) -> Processed[T]:
    """Runs ``work(conn)`` for ``record`` (a confluent-kafka ``Message``, or a
    message id) unless consumer group ``group`` processed it already, in one
    local transaction of ``conn`` with the inbox row. ``conn`` is a PyMySQL or
    psycopg 3 connection or an SQLAlchemy ``Connection``/``Session`` (a
    transaction it has open is joined). Raises :class:`NoMessageIdError` for a record without a
    usable id (nothing done); what ``work`` raises goes on as it is, after
    the rollback."""
    group = v.check_group(group)
    id_ = _id_of(record)
    db = _db.sync_db(conn)
    db.begin()
    try:
        # Waits for a concurrent delivery's uncommitted row, then finds it
        # (0 rows: a repeat) or, that delivery having rolled back, takes it.
        if db.execute(_INSERT[db.dialect], (group, id_)) == 0:
            db.rollback()
            return Processed(repeat=True)
        value = work(conn)
    except BaseException:
        db.rollback()
        raise
    db.commit()
    return Processed(repeat=False, value=value)


async def aprocess(conn: Any, group: str, record: Any, work: Callable[[Any], Awaitable[T]]) -> Processed[T]:
    """The asyncio twin of :func:`process`: ``await work(conn)``; ``conn`` a
    psycopg ``AsyncConnection`` or SQLAlchemy ``AsyncConnection``/``AsyncSession``."""
    group = v.check_group(group)
    id_ = _id_of(record)
    db = _db.async_db(conn)
    await db.begin()
    try:
        if await db.execute(_INSERT[db.dialect], (group, id_)) == 0:
            await db.rollback()
            return Processed(repeat=True)
        value = await work(conn)
    except BaseException:
        await db.rollback()
        raise
    await db.commit()
    return Processed(repeat=False, value=value)
